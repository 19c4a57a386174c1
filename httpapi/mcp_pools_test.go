package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// send_sms takes a sender pool as POST /chat/send does: the pool picks
// the phone and SIM, the answer says which, and the job reaches that
// phone; list_pools lists the company's pools; every refusal, another
// company's pool included, is the API's error body and status.
func TestMCPSendThroughPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "mcp-pool-a@example.com")
	b := e.newCompany("Beta", "mcp-pool-b@example.com")
	phones := map[string]*vphone{
		"mcp-pool-1": e.runPhone(e.pairPhone(a.apiKey, "mcp-pool-1"), "BOTH", false),
		"mcp-pool-2": e.runPhone(e.pairPhone(a.apiKey, "mcp-pool-2"), "BOTH", false),
	}
	e.createPool(a.apiKey, map[string]any{"name": "team", "members": members("mcp-pool-1", "SIM1", "mcp-pool-2", "SIM2")})
	cs := e.mcpClient(a.apiKey)

	list, isErr := callTool(t, cs, "list_pools", nil)
	pools, _ := list["pools"].([]any)
	if isErr || len(pools) != 1 || pools[0].(map[string]any)["name"] != "team" || len(pools[0].(map[string]any)["members"].([]any)) != 2 {
		t.Fatalf("list_pools: %v", list)
	}

	// Round robin: one send to each member, each answered with its route.
	got := map[string]string{} // device -> queueId
	for i, to := range []string{"+15550101001", "+15550101002"} {
		sent, isErr := callTool(t, cs, "send_sms", map[string]any{"pool": "team", "phone": to, "message": "Pooled"})
		fp, _ := sent["device_fingerprint"].(string)
		if isErr || sent["message"] != "queued" || sent["pool"] != "team" || phones[fp] == nil || sent["queueId"] == "" {
			t.Fatalf("send %d through the pool: %v", i, sent)
		}
		if want := map[string]string{"mcp-pool-1": "SIM1", "mcp-pool-2": "SIM2"}[fp]; sent["sim_slot"] != want {
			t.Fatalf("send %d: sim_slot %v, want %s of %s", i, sent["sim_slot"], want, fp)
		}
		got[fp] = sent["queueId"].(string)
	}
	if len(got) != 2 {
		t.Fatalf("two sends went to %v, want one to each member", got)
	}
	for fp, id := range got {
		e.eventually(fp+" gets its job", func() bool {
			jobs := phones[fp].Jobs()
			return len(jobs) == 1 && jobs[0].ID == id && jobs[0].Message == "Pooled"
		})
		st, isErr := callTool(t, cs, "message_status", map[string]any{"id": id})
		if isErr || st["pool"] != "team" || st["device_fingerprint"] != fp {
			t.Fatalf("message_status of %s: %v, want the pool and %s", id, st, fp)
		}
	}

	// The same refusals as POST /chat/send, body for body.
	same := func(cs2 *mcp.ClientSession, key string, args map[string]any, status int, code, field string) map[string]any {
		t.Helper()
		api := e.do(call{method: "POST", path: "/chat/send", token: key, body: args})
		e.want(api, status, code)
		body, isErr := callTool(t, cs2, "send_sms", args)
		wantToolError(t, body, isErr, status, code, field)
		if api.str("field") != field || body["message"] != api.str("message") {
			t.Fatalf("%v: the tool answered %v, the API %s", args, body, api.Raw)
		}
		return body
	}
	acme, beta := cs, e.mcpClient(b.apiKey)
	msg := func(kv ...any) map[string]any {
		m := map[string]any{"phone": "+15550101003", "message": "hi"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	same(acme, a.apiKey, msg("pool", "team", "device_fingerprint", "mcp-pool-1"), http.StatusBadRequest, "validation_failed", "pool")
	same(acme, a.apiKey, msg("pool", "team", "sim_slot", "SIM1"), http.StatusBadRequest, "validation_failed", "sim_slot")
	same(acme, a.apiKey, msg(), http.StatusBadRequest, "validation_failed", "device_fingerprint")
	same(acme, a.apiKey, msg("pool", " "), http.StatusBadRequest, "validation_failed", "pool")
	same(acme, a.apiKey, msg("pool", "nope"), http.StatusNotFound, "not_found", "pool")
	// Another company's pool is no pool of Beta's, and Beta lists none.
	same(beta, b.apiKey, msg("pool", "team"), http.StatusNotFound, "not_found", "pool")
	if list, isErr := callTool(t, beta, "list_pools", nil); isErr || len(list["pools"].([]any)) != 0 {
		t.Fatalf("Beta's list_pools: %v", list)
	}

	// Every member at its SIM's cap of one a day: pool_capped, with the
	// Retry-After the route sends as a header.
	e.setCaps(a.apiKey, "mcp-pool-1", map[string]any{"slot": "SIM1", "per_day": 1})
	e.setCaps(a.apiKey, "mcp-pool-2", map[string]any{"slot": "SIM2", "per_day": 1})
	body := same(acme, a.apiKey, msg("pool", "team"), http.StatusTooManyRequests, "pool_capped", "pool")
	if s, _ := body["retry_after"].(float64); s < 1 || s > 86400 {
		t.Fatalf("pool_capped: retry_after %v, want the seconds to midnight UTC", body["retry_after"])
	}
	// Every member disabled: pool_unavailable.
	for fp := range phones {
		e.want(e.do(call{method: "PATCH", path: "/device/" + fp, token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	}
	e.setCaps(a.apiKey, "mcp-pool-1", map[string]any{"slot": "SIM1", "per_day": nil})
	e.setCaps(a.apiKey, "mcp-pool-2", map[string]any{"slot": "SIM2", "per_day": nil})
	same(acme, a.apiKey, msg("pool", "team"), http.StatusConflict, "pool_unavailable", "pool")
}
