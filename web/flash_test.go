package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A banner shows only what this server put in the address: a link from
// elsewhere with ?ok= or ?err= shows nothing, a refused plain form post
// comes back with its message.
func TestBannerShowsOnlyTheServersOwnMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	lure := "Your account is locked. Call +1 555 0100 to unlock it."
	for _, path := range []string{
		"/console/devices?err=" + url.QueryEscape(lure),
		"/console/devices?ok=" + url.QueryEscape(lure),
		"/console/devices?ok=" + url.QueryEscape(lure) + "&sig=AAAAAAAAAAAAAAAAAAAAAA",
		"/console/nowhere?err=" + url.QueryEscape(lure) + "&field=x",
		"/console/signin?err=" + url.QueryEscape(lure),
	} {
		if p := b.get(path); strings.Contains(p.body, "Your account is locked") {
			t.Errorf("GET %s shows the link's sentence", path)
		}
	}

	// A plain form post (no JavaScript) that fails comes back with the
	// server's message beside its field.
	form := url.Values{"csrf": {b.csrf}, "phone": {"not a number"}}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/opt-outs", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := read(t, res)
	if p.status != http.StatusSeeOther || !strings.Contains(p.location, "sig=") {
		t.Fatalf("refused plain post: %d to %q", p.status, p.location)
	}
	back := b.get(p.location)
	if !strings.Contains(back.body, `id="err-phone">`) || strings.Contains(back.body, `id="err-phone"></span>`) {
		t.Errorf("the signed error is not shown beside its field: %.2000s", back.body)
	}
	// The same sentence with another field is not the server's.
	u, _ := url.Parse(p.location)
	q := u.Query()
	q.Set("err", lure)
	u.RawQuery = q.Encode()
	if got := b.get(u.String()); strings.Contains(got.body, "Your account is locked") {
		t.Error("an altered signed error is shown")
	}
}
