package web_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestSessionStateTellsTheScriptItsToken: GET /console/session answers the
// page's script with the browser's session now, its user and CSRF token,
// for a page drawn for a session that has since ended (console.js, renew);
// it is never cached nor offered to another site, and without a session it
// is the 401 of every script's request.
func TestSessionStateTellsTheScriptItsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	get := func(b *browser) (page, struct {
		User uint64
		CSRF string
	}) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.url+"/console/session", nil)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", "https://evil.example")
		res, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		p := read(t, res)
		var s struct {
			User uint64
			CSRF string
		}
		if p.status == http.StatusOK {
			if err := json.Unmarshal([]byte(p.body), &s); err != nil {
				t.Fatalf("%s: %v", p.body, err)
			}
		}
		return p, s
	}
	p, s := get(ada)
	if p.status != http.StatusOK || s.User != 1 || s.CSRF != ada.csrf {
		t.Errorf("signed in: %d %s, want user 1 and the pages' token %q", p.status, p.body, ada.csrf)
	}
	if p.header.Get("Cache-Control") != "no-store" || p.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("headers %v: want no-store and no CORS", p.header)
	}
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	if p, _ := get(ada); p.status != http.StatusUnauthorized {
		t.Errorf("ended: %d %s, want 401", p.status, p.body)
	}
	ada.signIn("ada@acme.test", "Correct1horse")
	if p, s := get(ada); p.status != http.StatusOK || s.CSRF != ada.csrf || s.User != 1 {
		t.Errorf("signed in again: %d %s, want the new session's token %q", p.status, p.body, ada.csrf)
	}
}
