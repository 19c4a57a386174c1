package httpapi_test

import (
	"net/http"
	"testing"
)

// A tool checks its arguments in the order of the REST route it stands
// for, as docs/mcp.md says: the route reads its page and limit from the
// query string before its service reads the device, so a call wrong in
// both is told of the page or limit by either way; the tools left the
// range to the service, which named the device first.
func TestMCPChecksInTheRoutesOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-order-a@example.com")
	b := e.newCompany("Beta", "mcp-order-b@example.com")
	e.pairPhone(a.apiKey, "mcp-order-phone")
	cs := e.mcpClient(b.apiKey)

	for _, tc := range []struct {
		tool, path string
		args       map[string]any
	}{
		{"read_conversation", "/chat/messages?page=0", map[string]any{"page": 0}},
		{"read_conversation", "/chat/messages?phone=%2B15550100001&limit=101", map[string]any{"phone": "+15550100001", "limit": 101}},
		{"read_conversation", "/chat/messages?device_fingerprint=mcp-order-phone&phone=%2B15550100001&page=-1",
			map[string]any{"device_fingerprint": "mcp-order-phone", "phone": "+15550100001", "page": -1}},
		{"list_conversations", "/chat/conversations?limit=0", map[string]any{"limit": 0}},
		{"list_conversations", "/chat/conversations?device_fingerprint=mcp-order-phone&limit=1001", map[string]any{"device_fingerprint": "mcp-order-phone", "limit": 1001}},
	} {
		rest := e.do(call{method: "GET", path: tc.path, token: b.apiKey})
		e.want(rest, http.StatusBadRequest, "validation_failed")
		body, isErr := callTool(t, cs, tc.tool, tc.args)
		wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", rest.str("field"))
		if body["message"] != rest.str("message") {
			t.Fatalf("%s %v: message %q, want the route's %q", tc.tool, tc.args, body["message"], rest.str("message"))
		}
	}
}
