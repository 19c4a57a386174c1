package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestScriptGetsJSONErrors: whatever refuses a GET the console's script
// makes asking for JSON, it gets the contract's error body with the
// status, which it reads and shows; the same address opened as a page
// still gets the HTML error page. A refusal past the session's check (a
// number that is not the company's, an address no page has) answered the
// HTML page to the script too, which it could not read.
func TestScriptGetsJSONErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	for _, c := range []struct {
		path   string
		status int
		code   string
		page   bool // an address a person opens, not the script's alone
	}{
		{"/console/numbers/whatsapp/wa_nope", http.StatusNotFound, "not_found", true},
		{"/console/numbers/telegram/wa_1", http.StatusNotFound, "not_found", true},
		{"/console/nope", http.StatusNotFound, "not_found", true},
		{"/console/messages?device=fp-1&phone=%2B15550100000&phone=%2B15550100001", http.StatusBadRequest, "validation_failed", true},
		{"/console/numbers/whatsapp/wa_nope/messages", http.StatusNotFound, "not_found", false},
		{"/console/messages/thread?device=fp-gone&phone=%2B15550100000", http.StatusNotFound, "not_found", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.url+c.path, nil)
		req.Header.Set("Accept", "application/json")
		res, err := ada.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		p := read(t, res)
		var body struct{ Error, Message string }
		if p.status != c.status || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") ||
			json.Unmarshal([]byte(p.body), &body) != nil || body.Error != c.code || body.Message == "" {
			t.Errorf("the script's %s: %d %q %.200s, want %d with the error body %s", c.path, p.status, p.header.Get("Content-Type"), p.body, c.status, c.code)
		}
		if p := ada.get(c.path); c.page && (p.status != c.status || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html")) {
			t.Errorf("the page %s: %d %q, want %d and the HTML error page", c.path, p.status, p.header.Get("Content-Type"), c.status)
		}
	}
}
