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

// TestAgentSendRefusesInternalMedia: a media_url whose host is an internal
// address by itself (loopback, private, link-local, the cloud metadata
// address, localhost, a number read as an address) is refused with 400
// naming media_url, on both channels; a public name passes (the agent
// checks what it resolves to).
func TestAgentSendRefusesInternalMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	for _, u := range []string{
		"https://127.0.0.1/a.png",
		"https://127.0.0.1:8443/a.png",
		"https://[::1]/a.png",
		"https://[::ffff:127.0.0.1]/a.png",
		"https://localhost/a.png",
		"https://Files.LocalHost./a.png",
		"https://10.0.0.5/a.png",
		"https://192.168.1.1/a.png",
		"https://169.254.169.254/latest/meta-data/",
		"https://[fe80::1%25en0]/a.png",
		"https://0.0.0.0/a.png",
		"https://2130706433/a.png",
		"https://127.1/a.png",
	} {
		for _, c := range []struct{ path, idField, id string }{{"/whatsapp/send", "number_id", wa}, {"/imessage/send", "handle_id", im}} {
			r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: map[string]any{c.idField: c.id, "to": "+15557654321", "type": "image", "media_url": u}})
			if r.Status != 400 || r.str("error") != "validation_failed" || r.str("field") != "media_url" || r.str("message") == "" {
				t.Errorf("%s media_url %s: got %d %s, want 400 validation_failed field media_url", c.path, u, r.Status, r.Raw)
			}
		}
	}
	for _, ch := range []struct{ path, query string }{{"/whatsapp/messages", "number_id=" + wa}, {"/imessage/messages", "handle_id=" + im}} {
		if h := e.do(call{method: "GET", path: ch.path + "?" + ch.query, token: a.apiKey}); h.Body["total"] != 0.0 {
			t.Fatalf("refused sends were stored: %s", h.Raw)
		}
	}
	r := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "+15557654321", "type": "image", "media_url": "https://cdn.example.com/a.png"}})
	e.want(r, 202, "")
}

// TestAgentSendRefusesIDNAInternalMedia: a host that is an internal
// address once IDNA-mapped (UTS #46, as net/http maps a non-ASCII host
// before it dials: ideographic or fullwidth full stops, fullwidth digits)
// is refused like its ASCII spelling, on both channels.
func TestAgentSendRefusesIDNAInternalMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	// Caps high enough that a send wrongly accepted never hides the next case.
	caps := map[string]any{"caps": map[string]any{"per_minute": 1000, "per_hour": 1000, "per_day": 1000}}
	e.want(e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.apiKey, body: caps}), 200, "")
	e.want(e.do(call{method: "PATCH", path: "/imessage/handles/" + im, token: a.apiKey, body: caps}), 200, "")
	for _, u := range []string{
		"https://127\u30020\u30020\u30021/a.png",
		"https://127.0.0.\uff11/a.png",
		"https://10\uff0e0\uff0e0\uff0e5/a.png",
		"https://169\uff61254\uff61169\uff61254/latest/meta-data/",
		"https://localhost\u3002/a.png",
	} {
		for _, c := range []struct{ path, idField, id string }{{"/whatsapp/send", "number_id", wa}, {"/imessage/send", "handle_id", im}} {
			r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: map[string]any{c.idField: c.id, "to": "+15557654321", "type": "image", "media_url": u}})
			if r.Status != 400 || r.str("error") != "validation_failed" || r.str("field") != "media_url" {
				t.Errorf("%s media_url %s: got %d %s, want 400 validation_failed field media_url", c.path, u, r.Status, r.Raw)
			}
		}
	}
	// A real internationalised name still passes.
	r := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "+15557654321", "type": "image", "media_url": "https://b\u00fccher.example/a.png"}})
	e.want(r, 202, "")
}

// TestAgentSendRefusesInvisibleRecipientCharacters: an iMessage address
// holding a Unicode format character (a right-to-left override, a
// zero-width space, a byte-order mark) or a line or paragraph separator is
// refused with 400 naming to: invisible in the console and the API's
// answers, it shows another address than the one the agent is handed.
func TestAgentSendRefusesInvisibleRecipientCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	for _, to := range []string{
		"bob\u202e@example.com",
		"\ufeff-e@example.com",
		"bob@exa\u200bmple.com",
		"bob@example.com\u2028",
		"bob\u2029@example.com",
	} {
		r := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": to, "content": "hi"}})
		if r.Status != 400 || r.str("error") != "validation_failed" || r.str("field") != "to" || r.str("message") == "" {
			t.Errorf("to %q: got %d %s, want 400 validation_failed field to", to, r.Status, r.Raw)
		}
	}
	if h := e.do(call{method: "GET", path: "/imessage/messages?handle_id=" + im, token: a.apiKey}); h.Body["total"] != 0.0 {
		t.Fatalf("refused sends were stored: %s", h.Raw)
	}
}

// TestAgentMessageListsPageAsChatMessages: a number's or handle's message
// list pages as GET /chat/messages does (contract section 11): without
// limit a page holds 50, and a number or handle that is unknown, or another
// company's, is 404 naming the query parameter, as /chat/messages names
// device_fingerprint.
func TestAgentMessageListsPageAsChatMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	// Caps above the 21 sends below, even halved by the warm-up.
	caps := map[string]any{"caps": map[string]any{"per_minute": 100, "per_hour": 100, "per_day": 100}}
	e.want(e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.apiKey, body: caps}), 200, "")
	for i := 0; i < 21; i++ {
		e.want(e.waSend(a.apiKey, wa, "+15557654321", "hi"), 202, "")
	}
	h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey})
	e.want(h, 200, "")
	if items, _ := h.Body["messages"].([]any); len(items) != 21 || h.Body["total"] != 21.0 || h.Body["pages"] != 1.0 {
		t.Fatalf("default page: got %d messages, total %v, pages %v; want 21, 21, 1", len(items), h.Body["total"], h.Body["pages"])
	}
	for _, c := range []struct{ path, field, id, token string }{
		{"/whatsapp/messages?number_id=", "number_id", "wa_unknown", a.apiKey},
		{"/whatsapp/messages?number_id=", "number_id", wa, b.apiKey},
		{"/whatsapp/messages?number_id=", "number_id", im, a.apiKey},
		{"/imessage/messages?handle_id=", "handle_id", im, b.apiKey},
		{"/imessage/messages?handle_id=", "handle_id", "im_unknown", a.apiKey},
	} {
		r := e.do(call{method: "GET", path: c.path + c.id, token: c.token})
		if r.Status != 404 || r.str("error") != "not_found" || r.str("field") != c.field || r.str("message") == "" {
			t.Errorf("GET %s%s: got %d %s, want 404 not_found field %s", c.path, c.id, r.Status, r.Raw, c.field)
		}
	}
}
