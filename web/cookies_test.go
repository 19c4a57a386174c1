package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// TestHTTPSCookiesAreHostOnly: behind an https public URL the console's
// cookies carry the __Host- prefix (Secure, Path=/, no Domain), and cookies
// under the plain names are not read. A neighbouring host of the same site
// (evil.example.com beside sms.example.com) can set a cookie for the whole
// domain; under the plain names it planted a pre-sign-in token, and its
// forged sign-in form carrying the same value signed the victim's browser in
// to the attacker's account, or it planted the attacker's session cookie
// itself. A browser takes a __Host- cookie only from the host itself.
func TestHTTPSCookiesAreHostOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.https = true })
	e.company("Mallory", "mallory@evil.test", "Correct1horse")
	// The browser's cookies are Secure, so they are sent by hand: the tests
	// reach the server over plain http.
	do := func(method, path, cookie string, form url.Values) page {
		t.Helper()
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(form.Encode()))
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := (&http.Client{Transport: testhttp.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return read(t, res)
	}
	cookieOf := func(p page, name string) *http.Cookie {
		for _, c := range (&http.Response{Header: p.header}).Cookies() {
			if c.Name == name {
				return c
			}
		}
		return nil
	}
	hostOnly := func(c *http.Cookie) bool {
		return c != nil && c.Secure && c.HttpOnly && c.Path == "/" && c.Domain == "" && c.SameSite == http.SameSiteLaxMode
	}

	signin := do("GET", "/console/signin", "", nil)
	anon := cookieOf(signin, "__Host-simrelay_csrf")
	if !hostOnly(anon) || anon.Value != tokenOf(t, signin) {
		t.Fatalf("pre-sign-in cookie %+v (Set-Cookie %q): want __Host-simrelay_csrf, Secure, HttpOnly, Path=/, no Domain, holding the form's token",
			anon, signin.header.Values("Set-Cookie"))
	}

	// A token planted under the plain name, repeated in a forged form, signs nobody in.
	planted := strings.Repeat("m", 32)
	forged := do("POST", "/console/signin", "simrelay_csrf="+planted,
		url.Values{"csrf": {planted}, "email": {"mallory@evil.test"}, "password": {"Correct1horse"}})
	if forged.status != http.StatusForbidden || cookieOf(forged, "__Host-simrelay_session") != nil || cookieOf(forged, "simrelay_session") != nil {
		t.Fatalf("sign-in with a planted token: got %d, Set-Cookie %q; want 403 and no session", forged.status, forged.header.Values("Set-Cookie"))
	}

	// The real double submit signs in, with a host-only session cookie.
	ok := do("POST", "/console/signin", "__Host-simrelay_csrf="+anon.Value,
		url.Values{"csrf": {anon.Value}, "email": {"mallory@evil.test"}, "password": {"Correct1horse"}})
	sess := cookieOf(ok, "__Host-simrelay_session")
	if ok.status != http.StatusSeeOther || !hostOnly(sess) {
		t.Fatalf("sign-in: got %d, Set-Cookie %q; want 303 and a __Host- session cookie", ok.status, ok.header.Values("Set-Cookie"))
	}
	// And a host-only device cookie (account.DeviceHTTPCookie), sent back
	// by no other site's page.
	if dev := cookieOf(ok, "__Host-simrelay_device"); dev == nil || dev.Value == "" || !dev.Secure || !dev.HttpOnly || dev.Path != "/" ||
		dev.Domain != "" || dev.SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in: device cookie %+v (Set-Cookie %q): want __Host-simrelay_device, Secure, HttpOnly, Path=/, no Domain, SameSite=Strict",
			dev, ok.header.Values("Set-Cookie"))
	}
	if got := do("GET", "/console/", "__Host-simrelay_session="+sess.Value, nil); got.status != http.StatusOK {
		t.Fatalf("the overview with the session cookie: %d", got.status)
	}
	// The same session planted under the plain name opens nothing.
	if got := do("GET", "/console/", "simrelay_session="+sess.Value, nil); got.status != http.StatusSeeOther || !strings.HasPrefix(got.location, "/console/signin") {
		t.Errorf("the overview with the session under the plain name: got %d to %q, want 303 to sign in", got.status, got.location)
	}
}
