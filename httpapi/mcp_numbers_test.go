package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// list_numbers answers what GET /whatsapp/numbers and GET /imessage/handles
// answer the caller, field for field and in their order: channel whatsapp
// or imessage that route's answer alone, no channel both lists in one
// object. Another company's numbers, the same phone number announced by its
// own agent included, never appear; a member's token sees the company's,
// as on the routes; a channel the tool does not know is the 400
// validation_failed of a bad argument, naming channel.
func TestMCPListNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-num-a@example.com")
	b := e.newCompany("Beta", "mcp-num-b@example.com")
	e.runAgent(e.pairPhone(a.apiKey, "mcp-num-agent-a"), "mcp-num-agent-a",
		[]string{"+15550107001", "+15550107002"}, []string{"alice@example.com", "+15550107003"}, true)
	e.runAgent(e.pairPhone(a.apiKey, "mcp-num-agent-a2"), "mcp-num-agent-a2", []string{"+15550107004"}, nil, true)
	// Beta announces one of Acme's numbers too: a record and id of its own.
	e.runAgent(e.pairPhone(b.apiKey, "mcp-num-agent-b"), "mcp-num-agent-b",
		[]string{"+15550107001", "+15550107009"}, []string{"bob@example.com"}, true)
	e.eventually("Acme's numbers and handles are listed", func() bool {
		return len(e.numbers(a.apiKey, "whatsapp")) == 3 && len(e.numbers(a.apiKey, "imessage")) == 2
	})
	e.eventually("Beta's numbers and handles are listed", func() bool {
		return len(e.numbers(b.apiKey, "whatsapp")) == 2 && len(e.numbers(b.apiKey, "imessage")) == 1
	})
	_, memberAccess := e.phonesInviteMember(a, "mcp-num-member@example.com")

	// rest is the route's answer, decoded as the tool's is.
	rest := func(token, path string) map[string]any {
		r := e.do(call{method: "GET", path: path, token: token})
		e.want(r, http.StatusOK, "")
		var out map[string]any
		mustJSON(t, r.Raw, &out)
		return out
	}
	same := func(what string, got, want map[string]any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(want, "", " ")
			t.Fatalf("%s: the tool answered\n%s\nthe routes\n%s", what, g, w)
		}
	}
	for _, who := range []struct{ name, token string }{{"Acme's API key", a.apiKey}, {"Acme's member", memberAccess}, {"Beta's API key", b.apiKey}} {
		cs := e.mcpClient(who.token)
		numbers, handles := rest(who.token, "/whatsapp/numbers"), rest(who.token, "/imessage/handles")
		got, isErr := callTool(t, cs, "list_numbers", map[string]any{"channel": "whatsapp"})
		if isErr {
			t.Fatalf("%s: list_numbers whatsapp: %v", who.name, got)
		}
		same(who.name+": list_numbers whatsapp", got, numbers)
		got, isErr = callTool(t, cs, "list_numbers", map[string]any{"channel": "imessage"})
		if isErr {
			t.Fatalf("%s: list_numbers imessage: %v", who.name, got)
		}
		same(who.name+": list_numbers imessage", got, handles)
		for _, args := range []map[string]any{nil, {"channel": ""}} {
			got, isErr = callTool(t, cs, "list_numbers", args)
			if isErr {
				t.Fatalf("%s: list_numbers %v: %v", who.name, args, got)
			}
			same(fmt.Sprintf("%s: list_numbers %v", who.name, args), got, map[string]any{"numbers": numbers["numbers"], "handles": handles["handles"]})
		}
	}

	// Acme's lists hold Acme's ids and addresses only.
	cs := e.mcpClient(a.apiKey)
	got, _ := callTool(t, cs, "list_numbers", nil)
	raw, _ := json.Marshal(got)
	for _, n := range e.numbers(b.apiKey, "whatsapp") {
		if id := n["number_id"].(string); strings.Contains(string(raw), id) {
			t.Fatalf("Acme's list_numbers holds Beta's number %s: %s", id, raw)
		}
	}
	for _, n := range e.numbers(b.apiKey, "imessage") {
		if id := n["handle_id"].(string); strings.Contains(string(raw), id) {
			t.Fatalf("Acme's list_numbers holds Beta's handle %s: %s", id, raw)
		}
	}
	for _, addr := range []string{"+15550107009", "bob@example.com"} {
		if strings.Contains(string(raw), addr) {
			t.Fatalf("Acme's list_numbers holds Beta's %s: %s", addr, raw)
		}
	}
	// The send tools take the ids it answers.
	first := got["numbers"].([]any)[0].(map[string]any)
	sent, isErr := callTool(t, cs, "send_whatsapp", map[string]any{"number_id": first["number_id"], "to": "+15550108888", "content": "hi"})
	if isErr || sent["status"] != "queued" {
		t.Fatalf("send_whatsapp from list_numbers' %v: %v", first["number_id"], sent)
	}

	for _, ch := range []any{"sms", "WhatsApp", "fax", 7} {
		body, isErr := callTool(t, cs, "list_numbers", map[string]any{"channel": ch})
		wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "channel")
		if ch != 7 && body["message"] != "channel must be whatsapp or imessage." {
			t.Fatalf("channel %v: message %q", ch, body["message"])
		}
	}
	body, isErr := callTool(t, cs, "list_numbers", map[string]any{"channel": "whatsapp", "status": "active"})
	wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "status")
}

// tools/list carries every tool's annotations, each hint given: a read is
// read-only, idempotent, not destructive and of a closed world; a send is
// not read-only, not idempotent (each call sends again, unless its
// idempotency_key says it is a retry), not destructive (it adds a message)
// and of an open world (it reaches a person outside), as docs/mcp.md says.
func TestMCPToolAnnotations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "mcp-annot@example.com")
	r := e.do(call{method: "POST", path: "/mcp", token: a.apiKey, header: map[string]string{"Accept": "application/json, text/event-stream"},
		body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`})
	e.want(r, http.StatusOK, "")
	var rpc struct {
		Result struct {
			Tools []struct {
				Name        string         `json:"name"`
				Title       string         `json:"title"`
				Annotations map[string]any `json:"annotations"`
			} `json:"tools"`
		} `json:"result"`
	}
	mustJSON(t, r.Raw, &rpc)
	sends := []string{"send_imessage", "send_sms", "send_whatsapp"}
	reads := []string{"latest_inbound", "list_conversations", "list_devices", "list_numbers", "list_pools", "message_status", "read_conversation"}
	var names []string
	for _, tl := range rpc.Result.Tools {
		names = append(names, tl.Name)
		send := slices.Contains(sends, tl.Name)
		want := map[string]any{"title": tl.Title, "readOnlyHint": !send, "destructiveHint": false, "idempotentHint": !send, "openWorldHint": send}
		if tl.Title == "" || !reflect.DeepEqual(tl.Annotations, want) {
			t.Errorf("%s: annotations %v, want %v", tl.Name, tl.Annotations, want)
		}
	}
	if want := slices.Sorted(slices.Values(append(sends, reads...))); !slices.Equal(names, want) {
		t.Fatalf("tools/list: %v, want %v", names, want)
	}
}
