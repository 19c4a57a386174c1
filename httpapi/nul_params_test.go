package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestNULInPathsAndQueries: U+0000 (%00) in a query parameter is the
// client's 400 naming it, on either store, as in a body; in a path id it is
// the 404 of an id that names nothing. PostgreSQL cannot compare a text with
// it, so every route that looks such a value up answered 500 there (and 404
// or 200 on bbolt).
func TestNULInPathsAndQueries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	wantRefused(t, e, a.apiKey, []refused{
		{"GET", "/opt-outs?after=%2B1555%00", "after", nil},
		{"DELETE", "/opt-outs?phone=%00", "phone", nil},
		{"DELETE", "/opt-outs/a%00b", "", nil},
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B1555%00", "phone", nil},
		{"GET", "/chat/messages?device_fingerprint=a%00&phone=%2B15551234567", "device_fingerprint", nil},
		{"GET", "/chat/conversations?device_fingerprint=a%00", "device_fingerprint", nil},
		{"GET", "/automation/inbound-sms?device_fingerprint=a%00", "device_fingerprint", nil},
		{"GET", "/automation/latest-sms?device_fingerprint=a%00", "device_fingerprint", nil},
		{"GET", "/chat/queue/a%00", "", nil},
		{"DELETE", "/chat/queue/a%00", "", nil},
		{"GET", "/media/a%00", "", nil},
		{"GET", "/device/a%00/caps", "", nil},
		{"PATCH", "/device/a%00", "", map[string]any{"device_name": "x"}},
		{"DELETE", "/device/delete/a%00", "", nil},
		{"GET", "/whatsapp/messages/a%00", "", nil},
		{"GET", "/whatsapp/messages?number_id=a%00", "number_id", nil},
		{"PATCH", "/whatsapp/numbers/a%00", "", map[string]any{"status": "paused"}},
		{"GET", "/analytics?devices=a%00", "devices", nil},
		{"GET", "/chat/devices?x%00=1", "x", nil},
	})
	// An agent's upload names its file in the query too (POST /device/media).
	up := e.upload(reg.DeviceToken, "wa-1\x00/0", "", "image/png", pngBytes)
	e.want(up, http.StatusBadRequest, "validation_failed")
	if got := up.str("field"); got != "key" {
		t.Errorf("an upload key holding NUL: field %q, want key; body %s", got, up.Raw)
	}
	// A route that does not exist stays a 404, and %00 as text is only text.
	e.want(e.do(call{method: "GET", path: "/nope/a%00", token: a.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "GET", path: "/chat/queue/a%2500", token: a.apiKey}), http.StatusNotFound, "not_found")
}

// TestNULInAPathAMethodDoesNotTake: a route that does not take the method
// answers 405 naming the path; a path holding U+0000 is refused as the other
// paths holding it are (404, no id names it), not echoed back as \u0000.
func TestNULInAPathAMethodDoesNotTake(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for _, path := range []string{"/chat/queue/a%00", "/device/a%00/caps"} {
		r := e.do(call{method: "PUT", path: path, token: a.apiKey})
		e.want(r, http.StatusNotFound, "not_found")
		if strings.Contains(string(r.Raw), `\u0000`) {
			t.Errorf("PUT %s: the answer echoes the NUL: %s", path, r.Raw)
		}
	}
	// Without a NUL the 405 stands.
	e.want(e.do(call{method: "PUT", path: "/chat/queue/a", token: a.apiKey}), http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestNotUTF8InPathsQueriesAndKeys: bytes that are not UTF-8 (%FF) in a
// path id are the 404 of an id that names nothing, in a query parameter the
// client's 400 naming it, and in an Idempotency-Key (a header may carry any
// bytes) the 400 naming the header, on either store. PostgreSQL refuses
// such a text, so each answered 500 there; bbolt queued the sends.
func TestNotUTF8InPathsQueriesAndKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	wantRefused(t, e, a.apiKey, []refused{
		{"DELETE", "/opt-outs/%FF%FE", "", nil},
		{"PATCH", "/device/a%FF", "", map[string]any{"device_name": "x"}},
		{"GET", "/chat/queue/a%FF", "", nil},
		{"PUT", "/chat/queue/a%FF", "", nil}, // a method the route does not take
		{"DELETE", "/opt-outs?phone=%FF%FE", "phone", nil},
		{"GET", "/chat/messages?device_fingerprint=a%C3%28&phone=%2B15551234567", "device_fingerprint", nil},
		{"GET", "/chat/devices?x%FF=1", "x\uFFFD", nil},
	})
	wa := e.runAgentNumber(a.apiKey)
	for _, c := range []struct {
		path string
		body any
	}{
		{"/chat/send", sendBody("a-phone", "+15551234567", "hi", "")},
		{"/chat/send-bulk", bulkBody("a-phone", 2)},
		{"/whatsapp/send", map[string]any{"number_id": wa, "to": "+15551234567", "content": "hi"}},
	} {
		r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: c.body, header: map[string]string{"Idempotency-Key": "k\xff\xfe"}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != "Idempotency-Key" {
			t.Errorf("POST %s: field %q, want Idempotency-Key; body %s", c.path, got, r.Raw)
		}
	}
}

// runAgentNumber links an agent with one WhatsApp number and answers the
// number's id.
func (e *env) runAgentNumber(key string) string {
	e.t.Helper()
	e.runAgent(e.pairPhone(key, "utf8-agent"), "utf8-agent", []string{"+15550107777"}, nil, true)
	return e.numberID(key, "whatsapp", "+15550107777")
}

// refused is a request whose path or query holds what no id or parameter
// holds: field names the query parameter of its 400; empty, it is a path
// id, the 404 of an id that names nothing.
type refused struct {
	method, path, field string
	body                any
}

// wantRefused checks each request is refused as its case says.
func wantRefused(t *testing.T, e *env, token string, cases []refused) {
	t.Helper()
	for _, c := range cases {
		r := e.do(call{method: c.method, path: c.path, token: token, body: c.body})
		if c.field == "" {
			e.want(r, http.StatusNotFound, "not_found")
			continue
		}
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != c.field {
			t.Errorf("%s %s: field %q, want %q; body %s", c.method, c.path, got, c.field, r.Raw)
		}
	}
}
