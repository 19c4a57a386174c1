package web_test

import (
	"net/http"
	"net/url"
	"testing"
)

// sessionCookieOf is the session id the browser's cookie holds.
func (b *browser) sessionCookieOf() string {
	u, _ := url.Parse(b.e.url)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "simrelay_session" {
			return c.Value
		}
	}
	return ""
}

// withSession is a new browser holding only the session cookie id.
func (e *env) withSession(id string) *browser {
	b := e.browser()
	u, _ := url.Parse(e.url)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "simrelay_session", Value: id, Path: "/"}})
	return b
}

// TestSignInEndsTheSessionItReplaces: signing in as another user in the
// same browser ends the session its cookie held, rather than leaving it
// open until it idles out; a failed sign-in ends nothing, and another
// browser's session is never touched.
func TestSignInEndsTheSessionItReplaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	signedIn := func(id string) bool {
		t.Helper()
		return e.withSession(id).get("/console/devices").status == http.StatusOK
	}

	other := e.browser() // Ada's other browser
	other.signIn("ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	old := b.sessionCookieOf()
	if old == "" || !signedIn(old) {
		t.Fatal("no session after sign-in")
	}

	// A failed sign-in in the same browser leaves the session standing.
	anon := tokenOf(t, b.get("/console/signin"))
	if p := b.post("/console/signin", url.Values{"csrf": {anon}, "email": {"bo@bolt.test"}, "password": {"Wrong1horse"}}); p.status != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d %s", p.status, p.body)
	}
	if !signedIn(old) {
		t.Fatal("a failed sign-in ended the browser's session")
	}

	b.signIn("bo@bolt.test", "Correct1horse")
	fresh := b.sessionCookieOf()
	if fresh == "" || fresh == old || !signedIn(fresh) {
		t.Fatal("the new sign-in has no session of its own")
	}
	if signedIn(old) {
		t.Error("the session the new sign-in replaced is still open")
	}
	if !signedIn(other.sessionCookieOf()) {
		t.Error("another browser's session ended")
	}

	// A cookie naming no session (made up, or ended) is no obstacle.
	c := e.withSession("cs_made-up")
	c.signIn("ada@acme.test", "Correct1horse")
	if !signedIn(c.sessionCookieOf()) {
		t.Error("a sign-in over a made-up cookie has no session")
	}
}
