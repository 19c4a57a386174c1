package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"
)

// A body declared in another charset is refused only where the charset
// would change what it says: one of ASCII bytes alone reads the same in
// ISO-8859-1 (the default of many HTTP clients' string bodies) as in
// UTF-8, so it is read; one with an accented letter is refused naming
// Content-Type, on a send and on POST /mcp alike.
func TestCharsetRefusedOnlyWhereItMatters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	const latin1 = "application/json; charset=ISO-8859-1"
	mcpHeader := map[string]string{"Content-Type": latin1, "Accept": "application/json, text/event-stream"}
	for _, c := range []struct {
		call    call
		refused bool
	}{
		{call{method: "POST", path: "/chat/send", header: map[string]string{"Content-Type": latin1},
			body: `{"device_fingerprint":"none","phone":"+15550100001","message":"cafe"}`}, false},
		{call{method: "POST", path: "/chat/send", header: map[string]string{"Content-Type": latin1},
			body: `{"device_fingerprint":"none","phone":"+15550100001","message":"café"}`}, true},
		{call{method: "POST", path: "/mcp", header: mcpHeader,
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}, false},
		{call{method: "POST", path: "/mcp", header: mcpHeader,
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"é"}}`}, true},
	} {
		c.call.token = a.apiKey
		r := e.do(c.call)
		named := r.Status == http.StatusBadRequest && r.str("field") == "Content-Type"
		if named != c.refused {
			t.Errorf("%s %s %s: got %d %s, want refused naming Content-Type: %v", c.call.method, c.call.path, c.call.body, r.Status, r.Raw, c.refused)
		}
	}
}

// TestCompressedBodyNamesContentEncoding: a body sent with a content coding
// (Content-Encoding: gzip) is refused naming Content-Encoding, on a send
// and on POST /mcp alike. The server reads no coding, and the gzipped bytes
// were answered "The request body is not valid JSON.", which sent the
// client looking at its JSON. identity is no coding and is read.
func TestCompressedBodyNamesContentEncoding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		_ = w.Close()
		return b.String()
	}
	send := `{"device_fingerprint":"none","phone":"+15550100001","message":"hello"}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	mcpHeader := func(coding string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Content-Encoding": coding}
	}
	for _, c := range []call{
		{method: "POST", path: "/chat/send", header: map[string]string{"Content-Encoding": "gzip"}, body: gz(send)},
		{method: "POST", path: "/chat/send", header: map[string]string{"Content-Encoding": "identity, br"}, body: send},
		{method: "PUT", path: "/webhooks/inbound-sms", header: map[string]string{"Content-Encoding": "deflate"}, body: `{"webhooks":[]}`},
		{method: "POST", path: "/mcp", header: mcpHeader("gzip"), body: gz(list)},
	} {
		c.token = a.apiKey
		r := e.do(c)
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != "Content-Encoding" {
			t.Errorf("%s %s with Content-Encoding %s: field %q, want Content-Encoding; body %s", c.method, c.path, c.header["Content-Encoding"], got, r.Raw)
		}
	}
	// identity is no coding: the body is read (the device is unknown).
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, header: map[string]string{"Content-Encoding": "Identity"}, body: send})
	e.want(r, http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "POST", path: "/mcp", token: a.apiKey, header: mcpHeader("identity"), body: list}), http.StatusOK, "")
}
