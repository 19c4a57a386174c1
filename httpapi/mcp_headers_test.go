package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// The MCP headers the transport reads (MCP-Protocol-Version, and from MCP
// 2026-07-28 on Mcp-Method and Mcp-Name, which gateways route and filter
// on and the server holds to the body) are one header each: given in two
// lines with different values the request is 400 validation_failed naming
// the header, as Content-Type is. The transport read the first line
// alone, so a call to send_sms with Mcp-Name send_sms then list_devices
// sent the SMS, where a gateway that read the last line (or both, joined
// with a comma) let a list_devices through; and an MCP-Protocol-Version of
// 2025-06-18 before 2026-07-28 turned the check of the other two off.
// The same value twice is one, and taken.
func TestMCPHeadersGivenTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-headers@example.com")
	e.pairPhone(a.apiKey, "mcp-headers-phone")
	const v = "2026-07-28"
	send := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_sms","arguments":{"device_fingerprint":"mcp-headers-phone","phone":"+15550100031","message":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
	post := func(header http.Header) (int, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(send))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		req.Header.Set("Authorization", "Bearer "+a.apiKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := testhttp.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, raw
	}
	for _, tc := range []struct {
		field  string
		header http.Header
	}{
		{"Mcp-Name", http.Header{"Mcp-Protocol-Version": {v}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"send_sms", "list_devices"}}},
		{"Mcp-Method", http.Header{"Mcp-Protocol-Version": {v}, "Mcp-Method": {"tools/call", "tools/list"}, "Mcp-Name": {"send_sms"}}},
		{"MCP-Protocol-Version", http.Header{"Mcp-Protocol-Version": {"2025-06-18", v}, "Mcp-Method": {"tools/list"}, "Mcp-Name": {"list_devices"}}},
	} {
		status, raw := post(tc.header)
		var body struct{ Error, Field, Message string }
		if err := json.Unmarshal(raw, &body); err != nil || status != http.StatusBadRequest || body.Error != "validation_failed" || body.Field != tc.field ||
			!strings.Contains(body.Message, "more than one header") {
			t.Fatalf("%v: %d %s, want 400 validation_failed naming %s", tc.header, status, raw, tc.field)
		}
	}
	r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=mcp-headers-phone&phone=%2B15550100031", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.Body["total"] != float64(0) {
		t.Fatalf("a refused call sent: %s", r.Raw)
	}
	// The same value twice is one header.
	status, raw := post(http.Header{"Mcp-Protocol-Version": {v, v}, "Mcp-Method": {"tools/call", "tools/call"}, "Mcp-Name": {"send_sms", "send_sms"}})
	if status != http.StatusOK || !strings.Contains(string(raw), `queueId`) {
		t.Fatalf("the same headers twice: %d %s", status, raw)
	}
}
