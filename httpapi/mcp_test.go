package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/pacing"
)

// bearer is the HTTP client of an MCP client: it sends the credential, and
// a public Host as a reverse proxy in front of the server would, while it
// connects over loopback.
type bearer struct{ token, host string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.host != "" {
		r.Host = b.host
	}
	return testhttp.Transport.RoundTrip(r)
}

// mcpClient connects the go-sdk's own MCP client to POST /mcp with the token.
func (e *env) mcpClient(token string) *mcp.ClientSession {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "simrelay-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, host: "gateway.example.com"}, Timeout: 10 * time.Second}}, nil)
	if err != nil {
		e.t.Fatalf("connect the MCP client: %v", err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and decodes its structured result (or error body).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (body map[string]any, isError bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: got %d content blocks, want 1", name, len(res.Content))
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if err := json.Unmarshal([]byte(text), &body); err != nil {
		t.Fatalf("%s: the result is not a JSON object: %v: %s", name, err, text)
	}
	return body, res.IsError
}

// wantToolError fails unless the call failed with the REST status and code.
func wantToolError(t *testing.T, body map[string]any, isError bool, status int, code, field string) {
	t.Helper()
	if !isError || body["status"] != float64(status) || body["error"] != code || body["message"] == "" {
		t.Fatalf("got isError %v, body %v; want status %d, error %q", isError, body, status, code)
	}
	if f, _ := body["field"].(string); f != field {
		t.Fatalf("got field %q, want %q; body %v", f, field, body)
	}
}

// An AI agent's MCP client lists the tools, sends an SMS that reaches the
// phone, follows it to delivered and reads the reply, through POST /mcp
// with the company's API key behind a proxy's public Host.
func TestMCPSendReachesPhoneAndReadsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-a@example.com")
	vp := e.runPhone(e.pairPhone(a.apiKey, "mcp-phone-a"), "BOTH", true)
	cs := e.mcpClient(a.apiKey)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "send_sms" {
			raw, _ := json.Marshal(tl.InputSchema)
			var schema struct {
				Required   []string                  `json:"required"`
				Properties map[string]map[string]any `json:"properties"`
			}
			mustJSON(t, raw, &schema)
			slices.Sort(schema.Required)
			// device_fingerprint or pool: one of the two, which a schema's required cannot say.
			if want := []string{"message", "phone"}; !slices.Equal(schema.Required, want) {
				t.Fatalf("send_sms requires %v, want %v", schema.Required, want)
			}
			if d, _ := schema.Properties["idempotency_key"]["description"].(string); d == "" {
				t.Fatalf("send_sms's idempotency_key has no description: %s", raw)
			}
		}
	}
	slices.Sort(names)
	want := []string{"latest_inbound", "list_conversations", "list_devices", "list_numbers", "list_pools", "message_status", "read_conversation", "send_imessage", "send_sms", "send_whatsapp"}
	if !slices.Equal(names, want) {
		t.Fatalf("got tools %v, want %v", names, want)
	}

	devs, isErr := callTool(t, cs, "list_devices", nil)
	if list, _ := devs["devices"].([]any); isErr || len(list) != 1 || list[0].(map[string]any)["device_fingerprint"] != "mcp-phone-a" || list[0].(map[string]any)["online"] != true {
		t.Fatalf("list_devices: %v", devs)
	}

	args := map[string]any{"device_fingerprint": "mcp-phone-a", "phone": "+15550100001", "message": "Your code is 4711", "idempotency_key": "agent-42"}
	sent, isErr := callTool(t, cs, "send_sms", args)
	queueID, _ := sent["queueId"].(string)
	if isErr || sent["message"] != "queued" || queueID == "" {
		t.Fatalf("send_sms: %v", sent)
	}
	e.eventually("the phone gets the SMS", func() bool {
		jobs := vp.Jobs()
		return len(jobs) == 1 && jobs[0].ID == queueID && jobs[0].Message == "Your code is 4711" && jobs[0].To == "+15550100001"
	})
	e.eventually("message_status says delivered", func() bool {
		st, isErr := callTool(t, cs, "message_status", map[string]any{"id": queueID})
		return !isErr && st["status"] == "delivered" && st["queue_id"] == queueID
	})

	// A retry with the key answers the first send again and sends nothing
	// new; the same key for another message is refused, as in the API.
	again, isErr := callTool(t, cs, "send_sms", args)
	if isErr || again["queueId"] != queueID {
		t.Fatalf("retried send_sms: %v, want queueId %s", again, queueID)
	}
	// The key is POST /chat/send's: the same send through the API is the retry too.
	rest := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, header: map[string]string{"Idempotency-Key": "agent-42"},
		body: map[string]any{"device_fingerprint": "mcp-phone-a", "phone": "+15550100001", "message": "Your code is 4711"}})
	e.want(rest, http.StatusOK, "")
	if rest.str("queueId") != queueID || rest.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("POST /chat/send with the tool's key: %s, want the replay of %s", rest.Raw, queueID)
	}
	args["message"] = "Something else"
	body, isErr := callTool(t, cs, "send_sms", args)
	wantToolError(t, body, isErr, http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")

	waitAck(t, vp.Receive(proto.Inbound{ClientID: "in-1", From: "+15550100001", Message: "Thanks, got it", SIMSlot: "SIM1"}))
	latest, isErr := callTool(t, cs, "latest_inbound", map[string]any{"limit": 1})
	if msgs, _ := latest["messages"].([]any); isErr || len(msgs) != 1 || msgs[0].(map[string]any)["message"] != "Thanks, got it" {
		t.Fatalf("latest_inbound: %v", latest)
	}
	convs, isErr := callTool(t, cs, "list_conversations", map[string]any{"device_fingerprint": "mcp-phone-a"})
	if list, _ := convs["conversations"].([]any); isErr || len(list) != 1 || list[0].(map[string]any)["messageCount"] != float64(2) {
		t.Fatalf("list_conversations: %v", convs)
	}
	body, isErr = callTool(t, cs, "list_conversations", map[string]any{"device_fingerprint": "mcp-phone-a", "limit": 1001})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "limit")
	thread, isErr := callTool(t, cs, "read_conversation", map[string]any{"device_fingerprint": "mcp-phone-a", "phone": "+15550100001"})
	msgs, _ := thread["messages"].([]any)
	if isErr || thread["total"] != float64(2) || len(msgs) != 2 ||
		msgs[0].(map[string]any)["message"] != "Thanks, got it" || msgs[1].(map[string]any)["queue_id"] != queueID {
		t.Fatalf("read_conversation: %v", thread)
	}

	// A bad argument is the API's validation error, field and all.
	body, isErr = callTool(t, cs, "send_sms", map[string]any{"device_fingerprint": "mcp-phone-a", "phone": "5550100001", "message": "hi"})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "phone")
	body, isErr = callTool(t, cs, "read_conversation", map[string]any{"device_fingerprint": "mcp-phone-a", "phone": "+15550100001", "limit": 500})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "limit")
	body, isErr = callTool(t, cs, "send_sms", map[string]any{"device_fingerprint": 7, "phone": "+15550100001", "message": "hi"})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "device_fingerprint")
}

// Another company's device, message or conversation is the API's 404, and
// the tools follow the caller's credential: a member's access token works too.
func TestMCPTenantsAndAccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-ta@example.com")
	b := e.newCompany("Beta", "mcp-tb@example.com")
	e.pairPhone(a.apiKey, "mcp-tenant-a")
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"device_fingerprint": "mcp-tenant-a", "phone": "+15550100002", "message": "hi"}})
	e.want(r, http.StatusOK, "")
	queueID := r.str("queueId")

	api := e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: map[string]any{"device_fingerprint": "mcp-tenant-a", "phone": "+15550100002", "message": "hi"}})
	e.want(api, http.StatusNotFound, "not_found")

	cs := e.mcpClient(b.access)
	body, isErr := callTool(t, cs, "send_sms", map[string]any{"device_fingerprint": "mcp-tenant-a", "phone": "+15550100002", "message": "hi"})
	wantToolError(t, body, isErr, http.StatusNotFound, "not_found", api.str("field"))
	if body["message"] != api.str("message") {
		t.Fatalf("got message %q, want the API's %q", body["message"], api.str("message"))
	}
	body, isErr = callTool(t, cs, "message_status", map[string]any{"id": queueID})
	wantToolError(t, body, isErr, http.StatusNotFound, "not_found", "")
	body, isErr = callTool(t, cs, "list_conversations", map[string]any{"device_fingerprint": "mcp-tenant-a"})
	wantToolError(t, body, isErr, http.StatusNotFound, "not_found", "device_fingerprint")
	body, isErr = callTool(t, cs, "read_conversation", map[string]any{"device_fingerprint": "mcp-tenant-a", "phone": "+15550100002"})
	wantToolError(t, body, isErr, http.StatusNotFound, "not_found", "device_fingerprint")
	devs, isErr := callTool(t, cs, "list_devices", nil)
	if list, _ := devs["devices"].([]any); isErr || len(list) != 0 {
		t.Fatalf("Beta's list_devices: %v", devs)
	}
	body, isErr = callTool(t, cs, "message_status", map[string]any{"id": queueID, "channel": "fax"})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "channel")
	// A missing id is a bad argument, as every tool's required argument is,
	// not a message that is not there.
	for _, ch := range []string{"", "sms", "whatsapp", "imessage"} {
		body, isErr = callTool(t, cs, "message_status", map[string]any{"channel": ch})
		wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "id")
	}

	// A member of Acme sees Acme's device and message: every tool is a member's route.
	_, memberAccess := e.phonesInviteMember(a, "mcp-tm@example.com")
	member := e.mcpClient(memberAccess)
	devs, isErr = callTool(t, member, "list_devices", nil)
	if list, _ := devs["devices"].([]any); isErr || len(list) != 1 || list[0].(map[string]any)["device_fingerprint"] != "mcp-tenant-a" {
		t.Fatalf("the member's list_devices: %v", devs)
	}
	st, isErr := callTool(t, member, "message_status", map[string]any{"id": queueID})
	if isErr || st["status"] != "queued" {
		t.Fatalf("the member's message_status: %v", st)
	}
	body, isErr = callTool(t, member, "latest_inbound", map[string]any{"limit": 0})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "limit")
}

// POST /mcp is an API route like the others: the credential, the rate
// limit's headers and window, the body limit and the contract's error body.
func TestMCPRouteRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *httpapi.Config) { c.GeneralRate = pacing.Rate{Limit: 9, Window: time.Minute} })
	a := e.newCompany("Acme", "mcp-rr@example.com")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}

	e.want(e.do(call{method: "POST", path: "/mcp", body: initialize, header: mcpHeaders}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "GET", path: "/mcp", token: a.apiKey}), http.StatusMethodNotAllowed, "method_not_allowed")

	r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: initialize, header: mcpHeaders})
	e.want(r, http.StatusOK, "")
	if r.Header.Get("RateLimit-Remaining") != "7" || !strings.Contains(string(r.Raw), `"serverInfo"`) {
		t.Fatalf("initialize: RateLimit-Remaining %q, body %s", r.Header.Get("RateLimit-Remaining"), r.Raw)
	}
	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: "[" + initialize + "]", header: mcpHeaders})
	e.want(r, http.StatusBadRequest, "invalid_json")
	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: initialize, header: map[string]string{"Accept": "application/json, text/html"}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "Accept" {
		t.Fatalf("got field %q, want Accept", r.str("field"))
	}
	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, header: mcpHeaders})
	e.want(r, http.StatusRequestEntityTooLarge, "payload_too_large")
	// The transport's own refusals leave as the contract's error body too.
	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: initialize,
		header: map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "1999-01-01"}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "MCP-Protocol-Version" || !strings.Contains(r.str("message"), "supported versions") {
		t.Fatalf("an unsupported protocol version: %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0",`, header: mcpHeaders}), http.StatusBadRequest, "invalid_json")
	e.want(e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"hello":"world"}`, header: mcpHeaders}), http.StatusBadRequest, "invalid_json")
	e.want(e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: initialize, header: map[string]string{"Accept": "application/*, text/*"}}), http.StatusOK, "")
	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: initialize, header: mcpHeaders})
	e.want(r, http.StatusTooManyRequests, "rate_limited")
}

// An MCP-Protocol-Version from 2026-07-28 on that the server does not speak
// is not the transport's plain refusal (validation_failed) but MCP
// 2026-07-28's negotiation in the message: a JSON-RPC error, -32022 with the
// versions it speaks, at HTTP 400, as docs/mcp.md says.
func TestMCPLaterProtocolVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-pv@example.com")
	const v = "2099-01-01"
	r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey,
		body:   `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		header: map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": v, "Mcp-Method": "tools/list"}})
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), `"code":-32022`) || !strings.Contains(string(r.Raw), `"2025-11-25"`) || !strings.Contains(string(r.Raw), `"id":5`) {
		t.Fatalf("a later protocol version: %d %s", r.Status, r.Raw)
	}
}

// MCP 2026-07-28's subscriptions/listen is answered and ended at once: the
// server's lists never change, so it has nothing to notify, and a request
// holds nothing open. With the SDK's default capabilities (tools that may
// change), it acknowledged and then held the request open until the
// client left: an open stream per request of the rate limit, kept through
// a shutdown, where docs/mcp.md says none is kept.
func TestMCPListenHoldsNothingOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-listen@example.com")
	const v = "2026-07-28"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["file:///x"]},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"`+v+`","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, val := range map[string]string{"Authorization": "Bearer " + a.apiKey, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": v, "Mcp-Method": "subscriptions/listen"} {
		req.Header.Set(k, val)
	}
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("subscriptions/listen: the answer did not end (%v) after %q", err, raw)
	}
	if !strings.Contains(string(raw), `"id":7`) {
		t.Fatalf("subscriptions/listen: %s %s, want its answer", res.Status, raw)
	}
	// initialize says so: the tool list does not change.
	r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey,
		body:   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`,
		header: map[string]string{"Accept": "application/json, text/event-stream"}})
	if strings.Contains(string(r.Raw), `"listChanged":true`) || !strings.Contains(string(r.Raw), `"tools":{`) {
		t.Fatalf("initialize: %s, want tools without listChanged", r.Raw)
	}
}

// A body that is JSON but no object (null, a string, a number, true) is one
// JSON-RPC message no more than a batch is, and is told so: the transport
// answered null as "malformed payload: empty batch" and a string with its
// decoder's words ("cannot unmarshal ... into Go value of type
// jsonrpc2.wireDecode"), which tell a client nothing it can mend.
func TestMCPBodyNotAnObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-obj@example.com")
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	for _, body := range []string{"null", ` "ping"`, "1", "true"} {
		r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: body, header: mcpHeaders})
		e.want(r, http.StatusBadRequest, "invalid_json")
		if msg := r.str("message"); !strings.Contains(msg, "a JSON object") || strings.Contains(msg, "batch") || strings.Contains(msg, "Go value") {
			t.Fatalf("body %s: %s", body, r.Raw)
		}
	}
}

// A method the server does not know is the transport's 400 invalid_json,
// naming it, up to MCP 2025-11-25, and a JSON-RPC method-not-found answer
// (404) from 2026-07-28, as docs/mcp.md says; an unknown tool is a JSON-RPC
// error under every version.
func TestMCPUnknownMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-um@example.com")
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0","id":3,"method":"tools/cal"}`, header: mcpHeaders})
	e.want(r, http.StatusBadRequest, "invalid_json")
	if !strings.Contains(r.str("message"), `"tools/cal" unsupported`) {
		t.Fatalf("an unknown method: %s", r.Raw)
	}
	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0","id":3,"method":"tools/cal"}`,
		header: map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}})
	if r.Status != http.StatusNotFound || !strings.Contains(string(r.Raw), `"code":-32601`) || !strings.Contains(string(r.Raw), `"id":3`) {
		t.Fatalf("an unknown method under 2026-07-28: %d %s", r.Status, r.Raw)
	}

	r = e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, header: mcpHeaders})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"code":-32602`) || !strings.Contains(string(r.Raw), `unknown tool`) {
		t.Fatalf("an unknown tool: %d %s", r.Status, r.Raw)
	}
}

// A numeric JSON-RPC id is answered as sent or refused: the transport reads
// it as a float64 and answered 1.5 as id 1 and 9007199254740993 as
// 9007199254740992, which the client could not match to its request.
func TestMCPRequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-id@example.com")
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	for _, id := range []string{"1.5", "9007199254740993", "-9007199254740993", "99999999999999999999", "1e400"} {
		r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`, header: mcpHeaders})
		e.want(r, http.StatusBadRequest, "invalid_json")
		if !strings.Contains(r.str("message"), "id "+id+" ") {
			t.Fatalf("id %s: %s", id, r.Raw)
		}
	}
	// The transport reads the message's keys as written ("id" only); a
	// second key that differs in case ("ID", "Id") hid the number from a
	// check that read keys without case, and 1.5 was answered as id 1.
	for _, body := range []string{`{"jsonrpc":"2.0","id":1.5,"ID":"x","method":"ping"}`, `{"jsonrpc":"2.0","Id":"x","id":99999999999999999999,"iD":"y","method":"ping"}`} {
		r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: body, header: mcpHeaders})
		e.want(r, http.StatusBadRequest, "invalid_json")
		if !strings.Contains(r.str("message"), "cannot be answered as sent") {
			t.Fatalf("%s: %s", body, r.Raw)
		}
	}
	for _, id := range []string{"9007199254740991", "-9007199254740991", "0", `"9007199254740993"`} {
		r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`, header: mcpHeaders})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"id":`+id+`,`) {
			t.Fatalf("id %s: %d %s", id, r.Status, r.Raw)
		}
	}
}

// send_whatsapp goes through the same send as POST /whatsapp/send: it
// reaches the company's agent and message_status follows it; another
// company's number is the API's 404.
func TestMCPWhatsApp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-wa@example.com")
	b := e.newCompany("Beta", "mcp-wb@example.com")
	ag := e.runAgent(e.pairPhone(a.apiKey, "mcp-agent-a"), "mcp-agent-a", []string{"+15550107777"}, nil, true)
	numberID := e.numberID(a.apiKey, "whatsapp", "+15550107777")

	cs := e.mcpClient(a.apiKey)
	sent, isErr := callTool(t, cs, "send_whatsapp", map[string]any{"number_id": numberID, "to": "+15550108888", "content": "Hello on WhatsApp"})
	id, _ := sent["id"].(string)
	if isErr || sent["status"] != "queued" || id == "" {
		t.Fatalf("send_whatsapp: %v", sent)
	}
	e.eventually("the agent gets the WhatsApp message", func() bool {
		jobs, _ := ag.Jobs()
		return len(jobs) == 1 && jobs[0].ID == id && jobs[0].Channel == "whatsapp" && jobs[0].Message == "Hello on WhatsApp"
	})
	e.eventually("message_status says delivered", func() bool {
		st, isErr := callTool(t, cs, "message_status", map[string]any{"id": id, "channel": "whatsapp"})
		return !isErr && st["status"] == "delivered" && st["number_id"] == numberID
	})
	body, isErr := callTool(t, cs, "send_whatsapp", map[string]any{"number_id": numberID, "to": "+15550108888", "type": "image"})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "media_url")

	api := e.waSend(b.apiKey, numberID, "+15550108888", "hi")
	e.want(api, http.StatusNotFound, "not_found")
	csB := e.mcpClient(b.apiKey)
	body, isErr = callTool(t, csB, "send_whatsapp", map[string]any{"number_id": numberID, "to": "+15550108888", "content": "hi"})
	wantToolError(t, body, isErr, http.StatusNotFound, "not_found", api.str("field"))
	body, isErr = callTool(t, csB, "message_status", map[string]any{"id": id, "channel": "whatsapp"})
	wantToolError(t, body, isErr, http.StatusNotFound, "not_found", "")
}

// A tool's arguments that are no JSON object (a string, an array, a
// number) are the tool's error in MCP's words: the tool's arguments, not
// a request body, which the caller sent whole and right.
func TestMCPArgumentsNotAnObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-args@example.com")
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	for _, args := range []string{`"{\"limit\":5}"`, `[]`, `5`, `true`} {
		r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, header: mcpHeaders,
			body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_devices","arguments":` + args + `}}`})
		if r.Status != http.StatusOK {
			t.Fatalf("arguments %s: %d %s", args, r.Status, r.Raw)
		}
		var rpc struct {
			Result struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Raw, &rpc); err != nil {
			t.Fatalf("arguments %s: %v: %s", args, err, r.Raw)
		}
		body := rpc.Result.StructuredContent
		wantToolError(t, body, rpc.Result.IsError, http.StatusBadRequest, "invalid_json", "")
		if msg, _ := body["message"].(string); msg != "The tool's arguments must be a JSON object." {
			t.Fatalf("arguments %s: message %q", args, msg)
		}
	}
}

// An argument a tool's input schema does not declare (it says
// additionalProperties: false) is refused, naming it, and nothing is sent:
// dropped as a REST body's unknown field, an agent's validity or priority
// (the route's, not the tool's) or a sendAt for send_at left the SMS to go
// at once, without the bound or the time it asked for.
func TestMCPUnknownArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-unknown@example.com")
	e.runPhone(e.pairPhone(a.apiKey, "mcp-unknown-phone"), "BOTH", true)
	cs := e.mcpClient(a.apiKey)

	send := func(extra map[string]any) map[string]any {
		args := map[string]any{"device_fingerprint": "mcp-unknown-phone", "phone": "+15550100077", "message": "Your code is 4711"}
		for k, v := range extra {
			args[k] = v
		}
		body, isErr := callTool(t, cs, "send_sms", args)
		if !isErr {
			t.Fatalf("send_sms with %v: sent %v", extra, body)
		}
		return body
	}
	body := send(map[string]any{"validity": 300})
	wantToolError(t, body, true, http.StatusBadRequest, "validation_failed", "validity")
	if msg, _ := body["message"].(string); !strings.HasPrefix(msg, "validity is not an argument of send_sms, which takes device_fingerprint, idempotency_key, message, phone, pool, send_at, sim_slot") {
		t.Fatalf("message %q", msg)
	}
	// Of several, the first in byte order; a key in another case is another key.
	wantToolError(t, send(map[string]any{"sendAt": "2030-01-01T00:00:00Z", "priority": 9}), true, http.StatusBadRequest, "validation_failed", "priority")
	wantToolError(t, send(map[string]any{"Phone": "+15550100078"}), true, http.StatusBadRequest, "validation_failed", "Phone")

	body, isErr := callTool(t, cs, "list_devices", map[string]any{"all": true})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "all")
	if msg, _ := body["message"].(string); msg != "all is not an argument of list_devices, which takes none." {
		t.Fatalf("message %q", msg)
	}
	body, isErr = callTool(t, cs, "read_conversation", map[string]any{"device_fingerprint": "mcp-unknown-phone", "phone": "+15550100077"})
	if msgs, _ := body["messages"].([]any); isErr || len(msgs) != 0 {
		t.Fatalf("a refused send was sent: %v", body)
	}
	// The declared arguments still pass, none of them left out.
	sent, isErr := callTool(t, cs, "send_sms", map[string]any{"device_fingerprint": "mcp-unknown-phone", "phone": "+15550100077", "message": "hi",
		"sim_slot": "SIM1", "send_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "idempotency_key": "k1"})
	if isErr || sent["message"] != "scheduled" {
		t.Fatalf("send_sms with every argument: %v", sent)
	}
}

// initialize names the server with its version (Config.Version, the
// binary's, as `simrelay version` prints it), and "devel" for a server
// given none; it was "" before.
func TestMCPServerInfoVersion(t *testing.T) {
	t.Parallel()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, c := range []struct{ given, want string }{{"v1.2.3", "v1.2.3"}, {"", "devel"}} {
		e := newEnv(t, func(cfg *httpapi.Config) { cfg.Version = c.given })
		a := e.newCompany("Acme", "mcp-version@example.com")
		r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, body: initialize, header: map[string]string{"Accept": "application/json, text/event-stream"}})
		e.want(r, http.StatusOK, "")
		var answer struct {
			Result struct {
				ServerInfo struct{ Name, Version string } `json:"serverInfo"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Raw, &answer); err != nil {
			t.Fatal(err)
		}
		if info := answer.Result.ServerInfo; info.Name != "simrelay" || info.Version != c.want {
			t.Errorf("version %q given: serverInfo %+v, want simrelay %s", c.given, info, c.want)
		}
	}
}
