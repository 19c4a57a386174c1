package httpapi_test

import (
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
