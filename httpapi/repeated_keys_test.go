package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyKeyGivenTwiceIsAFieldError: a body whose object gives one key
// twice with different values is 400 validation_failed naming it, as a
// query parameter given twice is, and nothing is done. The decoding took
// the last value without a word (message "x" then "y" sent "y"), where a
// proxy, a log or the integrator's own filter in front may have gone by the
// first; and it matches a field without case, so "message" then "Message"
// (or the long s of "meſsage") did the same. The same value twice is one
// value and is taken. POST /mcp compares keys as written, as its transport
// reads them (an "ID" beside "id" is no second id), and refuses a repeated
// one anywhere in the message before the transport sees it: two methods ran
// the last, two tool names called the last tool.
func TestBodyKeyGivenTwiceIsAFieldError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	for _, c := range []struct {
		method, path, body, field string
	}{
		{"POST", "/chat/send", `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"x","message":"y"}`, "message"},
		{"POST", "/chat/send", `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"x","Message":"y"}`, "Message"},
		{"POST", "/chat/send", `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"x","meſsage":"y"}`, "meſsage"},
		{"POST", "/chat/send", `{"device_fingerprint":"a-phone","phone":"+15551234567","PHONE":"+15559999999","message":"x"}`, "PHONE"},
		{"POST", "/chat/send-bulk", `{"device_fingerprint":"a-phone","messages":[{"phone":"+15551234567","message":"ok"},{"phone":"+15551234567","phone":"+15557654321","message":"b"}]}`, "messages[1].phone"},
		{"PATCH", "/company", `{"name":"Acme","name":"Other"}`, "name"},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_sms","arguments":{"device_fingerprint":"a-phone","phone":"+15551234567","message":"x","message":"y"}}}`, "params.arguments.message"},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_sms","name":"list_devices","arguments":{}}}`, "params.name"},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices"},"method":"tools/list"}`, "method"},
	} {
		r := e.do(call{method: c.method, path: c.path, token: a.apiKey, body: c.body, header: mcpHeaders})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != c.field {
			t.Errorf("%s %s %s: field %q, want %q; body %s", c.method, c.path, c.body, got, c.field, r.Raw)
		}
		if msg := r.str("message"); !strings.Contains(msg, "more than once") {
			t.Errorf("%s %s %s: message %q", c.method, c.path, c.body, msg)
		}
	}
	msgs := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567", token: a.apiKey})
	e.want(msgs, http.StatusOK, "")
	if total, _ := msgs.Body["total"].(float64); total != 0 {
		t.Fatalf("refused sends stored messages: %s", msgs.Raw)
	}
	if co := e.do(call{method: "GET", path: "/company", token: a.apiKey}); co.str("name") != "Acme" {
		t.Fatalf("the refused PATCH changed the company: %s", co.Raw)
	}

	// The same value twice is one value; another key, or the same key in
	// another object, is no repetition.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey,
		body: `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"same","message":"same"}`}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey,
		body: `{"device_fingerprint":"a-phone","messages":[{"phone":"+15551234567","message":"a"},{"phone":"+15551234568","message":"b"}]}`}), http.StatusOK, "")
	r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, header: mcpHeaders,
		body: `{"jsonrpc":"2.0","id":7,"ID":8,"method":"tools/call","params":{"name":"list_devices","arguments":{}}}`})
	e.want(r, http.StatusOK, "")
	if !strings.Contains(string(r.Raw), `"id":7`) || !strings.Contains(string(r.Raw), "a-phone") {
		t.Fatalf("MCP call with id and ID: %s", r.Raw)
	}
}
