package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// TestPagingParametersRefuseWithTheirRange: every value a page or limit
// does not take, out of its range, past the largest integer or no whole
// number at all, is refused with the one sentence of its range, naming
// it: ?page=0 and ?page=1e20 were "page must be 1 or more." and "page must
// be a whole number.". The MCP tools that page say the same.
func TestPagingParametersRefuseWithTheirRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	const pageRange = "page must be from 1 to 9223372036854775807."
	bad := []string{"0", "-1", "abc", "1e20", "2.5", "0x10", " 5", "5 ", "99999999999999999999", "-99999999999999999999", "9223372036854775808"}
	for _, c := range []struct {
		path, param, want string // path ends in & or ?
		limit             int    // the largest value the parameter takes, for limits
	}{
		{"/chat/messages?device_fingerprint=of-a&phone=%2B15550100001&", "page", pageRange, 0},
		{"/chat/messages?device_fingerprint=of-a&phone=%2B15550100001&", "limit", "limit must be from 1 to 100.", 100},
		{"/chat/messages?", "page", pageRange, 0}, // before the required device, as for any page
		{"/whatsapp/messages?number_id=wa_unknown&", "page", pageRange, 0},
		{"/whatsapp/messages?number_id=wa_unknown&", "limit", "limit must be from 1 to 100.", 100},
		{"/imessage/messages?handle_id=im_unknown&", "page", pageRange, 0},
		{"/imessage/messages?handle_id=im_unknown&", "limit", "limit must be from 1 to 100.", 100},
		{"/opt-outs?", "limit", "limit must be from 1 to 1000.", 1000},
		{"/webhooks/deliveries?", "limit", "limit must be from 1 to 100.", 100},
	} {
		values := bad
		if c.limit > 0 {
			values = append(values, fmt.Sprint(c.limit+1))
		}
		for _, v := range values {
			path := c.path + c.param + "=" + url.QueryEscape(v)
			r := e.do(call{method: "GET", path: path, token: a.apiKey})
			if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != c.param || r.str("message") != c.want {
				t.Errorf("GET %s: %d %s, want 400 %q", path, r.Status, r.Raw, c.want)
			}
		}
	}
	cs := e.mcpClient(a.apiKey)
	for _, c := range []struct {
		tool        string
		param, want string
		v           any
	}{
		{"read_conversation", "page", pageRange, 0},
		{"read_conversation", "page", pageRange, -1},
		{"read_conversation", "page", pageRange, json.Number("1e20")},
		{"read_conversation", "limit", "limit must be from 1 to 100.", 0},
		{"read_conversation", "limit", "limit must be from 1 to 100.", 101},
		{"latest_inbound", "limit", "limit must be from 1 to 50.", 0},
		{"latest_inbound", "limit", "limit must be from 1 to 50.", 51},
	} {
		args := map[string]any{"device_fingerprint": "of-a", "phone": "+15550100001", c.param: c.v}
		if c.tool == "latest_inbound" {
			args = map[string]any{c.param: c.v}
		}
		body, isErr := callTool(t, cs, c.tool, args)
		wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", c.param)
		if body["message"] != c.want {
			t.Errorf("%s with %s %v: %v, want %q", c.tool, c.param, c.v, body, c.want)
		}
	}
}
