package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestScriptReloadsGet401WhenTheSessionEnded: the page's script reloads a
// thread, a number's messages and the pairing panel's devices with fetch,
// asking for JSON. Once the session has ended (or for a browser that never
// signed in) it gets 401 with the contract's error body, which it acts on,
// not a redirect to the sign-in page, whose HTML fetch would follow and
// fail to read. The same address opened as a page still goes to sign-in.
func TestScriptReloadsGet401WhenTheSessionEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	paths := []string{
		"/console/messages/thread?device=fp-1&phone=%2B15550100000",
		"/console/devices/state",
		"/console/numbers/whatsapp/wa_1/messages",
		"/console/media/med_1",
	}
	getJSON := func(b *browser, path string) page {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		req.Header.Set("Accept", "application/json")
		res, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return read(t, res)
	}
	if p := getJSON(ada, paths[0]); p.status != http.StatusOK {
		t.Fatalf("the thread while signed in: %d %s", p.status, p.body)
	}
	if err := e.store.RevokeUserSessions(1); err != nil { // signed out elsewhere
		t.Fatal(err)
	}
	for name, b := range map[string]*browser{"ended": ada, "never signed in": e.browser()} {
		for _, path := range paths {
			p := getJSON(b, path)
			var body struct{ Error, Message string }
			if p.status != http.StatusUnauthorized || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") ||
				json.Unmarshal([]byte(p.body), &body) != nil || body.Error != "unauthorized" || body.Message == "" {
				t.Errorf("%s, the script's %s: %d %q %s, want 401 with the error body", name, path, p.status, p.header.Get("Content-Type"), p.body)
			}
			if p := b.get(path); p.status != http.StatusSeeOther || p.location != "/console/signin?next="+url.QueryEscape(path) {
				t.Errorf("%s, the page %s: %d to %q, want the sign-in page", name, path, p.status, p.location)
			}
		}
	}
}
