package httpapi_test

import (
	"testing"
)

// TestAgentSendRefusesUnsafeRecipients: a recipient that a device tool
// could read as an option (it begins with "-") or that holds a control
// character is refused with 400 naming to, on both channels, and nothing
// is stored.
func TestAgentSendRefusesUnsafeRecipients(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	cases := []struct{ path, id, to string }{
		{"/imessage/send", im, "-e@example.com"},
		{"/imessage/send", im, "-ljavascript@x.co"},
		{"/imessage/send", im, " -e@example.com"},
		{"/imessage/send", im, "bob@example.com\n"},
		{"/imessage/send", im, "bob\r@example.com"},
		{"/imessage/send", im, "bob\x00@example.com"},
		{"/imessage/send", im, "bob\u0085@example.com"},
		{"/imessage/send", im, "-+15557654321"},
		{"/whatsapp/send", wa, "-+15557654321"},
		{"/whatsapp/send", wa, "+15557654321\n"},
		{"/whatsapp/send", wa, "+1555\t7654321"},
	}
	for _, c := range cases {
		idField := "number_id"
		if c.path == "/imessage/send" {
			idField = "handle_id"
		}
		r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: map[string]any{idField: c.id, "to": c.to, "content": "hi"}})
		if r.Status != 400 || r.str("error") != "validation_failed" || r.str("field") != "to" || r.str("message") == "" {
			t.Errorf("%s to %q: got %d %s, want 400 validation_failed field to", c.path, c.to, r.Status, r.Raw)
		}
	}
	for _, ch := range []struct{ path, query string }{{"/whatsapp/messages", "number_id=" + wa}, {"/imessage/messages", "handle_id=" + im}} {
		if h := e.do(call{method: "GET", path: ch.path + "?" + ch.query, token: a.apiKey}); h.Body["total"] != 0.0 {
			t.Fatalf("refused sends were stored: %s", h.Raw)
		}
	}
	// The refusals concern the form only: an address with a dash inside is fine.
	r := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "ana-maria@example.com", "content": "hi"}})
	e.want(r, 202, "")
}
