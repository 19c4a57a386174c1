package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSignOutOfAnEndedSession: signing out of a session that already
// ended clears the cookie and goes to the sign-in page, saying so, for the
// script (JSON) and a plain post alike; it was the 401 of every action, and
// the page stayed, its data shown. A session that stands still needs its
// token to be signed out.
func TestSignOutOfAnEndedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	if p := ada.post("/console/signout", url.Values{"csrf": {"not-the-token"}}); p.status != http.StatusForbidden {
		t.Errorf("a standing session with a wrong token: %d %s, want 403", p.status, p.body)
	}
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	p := ada.post("/console/signout", nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, `"redirect":"/console/signin"`) || !strings.Contains(p.body, "already ended") {
		t.Errorf("the script's sign-out of an ended session: %d %s", p.status, p.body)
	}
	if ck := cookieNamed(ada, e.url, "simrelay_session"); ck != "" {
		t.Errorf("the session cookie stays: %q", ck)
	}

	ada.signIn("ada@acme.test", "Correct1horse")
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/signout", strings.NewReader("csrf="+url.QueryEscape(ada.csrf)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := ada.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p = read(t, res)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/console/signin?") {
		t.Fatalf("a plain sign-out of an ended session: %d to %q", p.status, p.location)
	}
	if got := ada.get(p.location); !strings.Contains(got.body, "already ended") {
		t.Errorf("the sign-in page does not say it: %.300s", got.body)
	}
}

func cookieNamed(b *browser, base, name string) string {
	u, _ := url.Parse(base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// TestBrowserSignOutAfterTheSessionEnded: "Sign out" on a tab whose
// session ended while it was open goes to the sign-in page; it stayed on
// the page, its data shown, saying the session expired.
func TestBrowserSignOutAfterTheSessionEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the team", chromedp.Navigate(e.url+"/console/team"), chromedp.WaitVisible(chromedp.CSS(`#users`)))
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`.signout button`)))
	waitFor(t, ctx, "the sign-in page", `location.pathname === "/console/signin" && !document.querySelector("#users")`)
	waitText(t, ctx, "#banner", "Signed out")
}
