package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestConsoleRequestReadsItsSessionOnce: the API's rate limit resolves a
// console request's session (Identity) and hands the console the request
// carrying it, so the page does not read (and touch) the session again.
// Shown by ending the session between the two: the page Identity resolved
// is served, and the same request without what Identity resolved, which
// reads the session, is sent to sign in.
func TestConsoleRequestReadsItsSessionOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	u, _ := url.Parse(e.url)
	var session *http.Cookie
	for _, ck := range ada.c.Jar.Cookies(u) {
		if ck.Name == "simrelay_session" {
			session = ck
		}
	}
	if session == nil {
		t.Fatal("no session cookie after sign-in")
	}
	con, err := e.console()
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/console/devices", nil)
	r.AddCookie(session)
	id, resolved, ok := con.Identity(r)
	if !ok || id == "" {
		t.Fatalf("Identity: %q %v", id, ok)
	}
	if err := e.accounts.ConsoleSignOut(context.Background(), session.Value); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	con.Handler().ServeHTTP(w, resolved)
	if w.Code != http.StatusOK {
		t.Fatalf("the page with the session Identity resolved: %d, want 200 without reading the session again", w.Code)
	}
	w = httptest.NewRecorder()
	con.Handler().ServeHTTP(w, r)
	if w.Code == http.StatusOK {
		t.Fatalf("the page reading the ended session: 200, want it sent to sign in")
	}
}
