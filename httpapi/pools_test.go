package httpapi_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// poolSend sends one SMS through a pool and returns the answer.
func (e *env) poolSend(key, pool, to, text string) resp {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/chat/send", token: key, body: map[string]any{"pool": pool, "phone": to, "message": text}})
	e.want(r, http.StatusOK, "")
	return r
}

// createPool defines a pool and returns its answer.
func (e *env) createPool(key string, body map[string]any) resp {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/pools", token: key, body: body})
	e.want(r, http.StatusCreated, "")
	return r
}

func members(pairs ...string) []map[string]any {
	var out []map[string]any
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, map[string]any{"device_fingerprint": pairs[i], "sim_slot": pairs[i+1]})
	}
	return out
}

// Pool definitions are checked field by field; another company's pools,
// devices and member ids are 404; a send names a pool or a device.
func TestPoolDefinitionsAndTenancy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "a-1")
	e.pairPhone(a.apiKey, "a-2")
	e.pairPhone(b.apiKey, "b-1")

	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"members": members("a-1", "SIM1")}, "name"},
		{map[string]any{"name": " ", "members": members("a-1", "SIM1")}, "name"},
		{map[string]any{"name": "p"}, "members"},
		{map[string]any{"name": "p", "members": []any{}}, "members"},
		{map[string]any{"name": "p", "strategy": "random", "members": members("a-1", "SIM1")}, "strategy"},
		{map[string]any{"name": "p", "strategy": "round_robin", "fallback": "least_loaded", "members": members("a-1", "SIM1")}, "fallback"},
		{map[string]any{"name": "p", "strategy": "sticky", "fallback": "sticky", "members": members("a-1", "SIM1")}, "fallback"},
		{map[string]any{"name": "p", "members": members("a-1", "SIM1", "a-2", "SIM3")}, "members[1].sim_slot"},
		{map[string]any{"name": "p", "members": members("a-1", "SIM1", "", "SIM1")}, "members[1].device_fingerprint"},
		{map[string]any{"name": "p", "members": members("a-1", "SIM1", "a-1", "SIM1")}, "members[1]"},
		{map[string]any{"name": 7, "members": members("a-1", "SIM1")}, "name"},
		// Seconds whose nanoseconds overflow int64 are out of range, not a
		// wrapped (negative) duration.
		{map[string]any{"name": "p", "failover_after": int64(9223372037), "members": members("a-1", "SIM1")}, "failover_after"},
		{map[string]any{"name": "p", "failover_after": int64(604801), "members": members("a-1", "SIM1")}, "failover_after"},
	} {
		r := e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: c.body})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != c.field {
			t.Errorf("%v: got field %q, want %q", c.body, r.str("field"), c.field)
		}
	}
	// A device of another company is no device of this one.
	r := e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "p", "members": members("a-1", "SIM1", "b-1", "SIM1")}})
	e.want(r, http.StatusNotFound, "not_found")
	if r.str("field") != "members[1].device_fingerprint" {
		t.Errorf("got field %q, want members[1].device_fingerprint", r.str("field"))
	}

	p := e.createPool(a.apiKey, map[string]any{"name": "sales", "members": members("a-1", "SIM1", "a-2", "SIM2")})
	if p.str("strategy") != "round_robin" || p.Body["fallback"] != nil {
		t.Fatalf("got %s, want the round_robin default and no fallback", p.Raw)
	}
	id := strconv.Itoa(int(p.Body["id"].(float64)))
	ms := p.Body["members"].([]any)
	m2 := strconv.Itoa(int(ms[1].(map[string]any)["id"].(float64)))
	e.want(e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "SALES", "members": members("a-1", "SIM1")}}), http.StatusConflict, "conflict")
	// Another company's pool of the same name is its own.
	e.createPool(b.apiKey, map[string]any{"name": "sales", "members": members("b-1", "SIM1")})

	for _, c := range []call{
		{method: "GET", path: "/pools/" + id},
		{method: "PATCH", path: "/pools/" + id, body: map[string]any{"strategy": "sticky"}},
		{method: "DELETE", path: "/pools/" + id},
		{method: "POST", path: "/pools/" + id + "/members", body: map[string]any{"device_fingerprint": "b-1"}},
		{method: "DELETE", path: "/pools/" + id + "/members/" + m2},
		{method: "GET", path: "/pools/nope"},
	} {
		c.token = b.apiKey
		e.want(e.do(c), http.StatusNotFound, "not_found")
	}
	e.want(e.do(call{method: "DELETE", path: "/pools/" + id + "/members/999", token: a.apiKey}), http.StatusNotFound, "not_found")
	add := e.do(call{method: "POST", path: "/pools/" + id + "/members", token: a.apiKey, body: map[string]any{"device_fingerprint": "b-1"}})
	e.want(add, http.StatusNotFound, "not_found")
	if add.str("field") != "device_fingerprint" {
		t.Errorf("got field %q, want device_fingerprint", add.str("field"))
	}
	e.want(e.do(call{method: "POST", path: "/pools/" + id + "/members", token: a.apiKey, body: map[string]any{"device_fingerprint": "a-2", "sim_slot": "SIM2"}}), http.StatusConflict, "conflict")
	added := e.do(call{method: "POST", path: "/pools/" + id + "/members", token: a.apiKey, body: map[string]any{"device_fingerprint": "a-2"}})
	e.want(added, http.StatusCreated, "")
	if added.str("device_fingerprint") != "a-2" || added.str("sim_slot") != "SIM1" || added.Body["id"].(float64) != 3 {
		t.Fatalf("got %s, want member 3, a-2 SIM1", added.Raw)
	}

	// Sends: neither device nor pool is the contract's 400; both, or a slot
	// with a pool, name the field; another company's pool is 404.
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"phone": "+15551234567", "message": "x"}, "device_fingerprint"},
		{map[string]any{"pool": "sales", "device_fingerprint": "a-1", "phone": "+15551234567", "message": "x"}, "pool"},
		{map[string]any{"pool": "sales", "sim_slot": "SIM1", "phone": "+15551234567", "message": "x"}, "sim_slot"},
	} {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: c.body})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != c.field {
			t.Errorf("%v: got field %q, want %q", c.body, r.str("field"), c.field)
		}
	}
	miss := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"pool": "nope", "phone": "+15551234567", "message": "x"}})
	e.want(miss, http.StatusNotFound, "not_found")
	if miss.str("field") != "pool" {
		t.Errorf("got field %q, want pool", miss.str("field"))
	}
	bulk := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"pool": "nope", "messages": []any{map[string]any{"phone": "+15551234567", "message": "x"}}}})
	e.want(bulk, http.StatusNotFound, "not_found")

	// A pool whose every member is disabled refuses, saying why.
	e.want(e.do(call{method: "PATCH", path: "/pools/" + id, token: a.apiKey, body: map[string]any{"members": members("a-1", "SIM1")}}), http.StatusOK, "")
	e.want(e.do(call{method: "PATCH", path: "/device/a-1", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	r = e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"pool": "sales", "phone": "+15551234567", "message": "x"}})
	e.want(r, http.StatusConflict, "pool_unavailable")

	list := e.do(call{method: "GET", path: "/pools", token: b.apiKey})
	e.want(list, http.StatusOK, "")
	if ps := list.Body["pools"].([]any); len(ps) != 1 || ps[0].(map[string]any)["members"].([]any)[0].(map[string]any)["device_fingerprint"] != "b-1" {
		t.Fatalf("another company's list: got %s, want its one pool", list.Raw)
	}
	e.want(e.do(call{method: "DELETE", path: "/pools/" + id + "/members/1", token: a.apiKey}), http.StatusConflict, "conflict")
	e.want(e.do(call{method: "DELETE", path: "/pools/" + id, token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "GET", path: "/pools/" + id, token: a.apiKey}), http.StatusNotFound, "not_found")
}

// round_robin spreads sends evenly (exactly, with members that can all
// take them); the answer, the queue item and the phone's job carry the
// chosen device and SIM; a bulk send spreads the same way.
func TestPoolRoundRobinSpreads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phones := map[string]*vphone{}
	for _, fp := range []string{"rr-1", "rr-2", "rr-3"} {
		phones[fp] = e.runPhone(e.pairPhone(a.apiKey, fp), "BOTH", false)
	}
	e.createPool(a.apiKey, map[string]any{"name": "spread", "strategy": "round_robin",
		"members": members("rr-1", "SIM1", "rr-2", "SIM1", "rr-2", "SIM2", "rr-3", "SIM2")})
	count := map[string]int{}
	for i := range 40 {
		r := e.poolSend(a.apiKey, "spread", fmt.Sprintf("+1555100%04d", i), "hi")
		fp, slot := r.str("device_fingerprint"), r.str("sim_slot")
		if r.str("pool") != "spread" || fp == "" || slot == "" || r.str("message") != "queued" {
			t.Fatalf("got %s, want the pool, device and SIM", r.Raw)
		}
		count[fp+"/"+slot]++
		if i == 0 {
			q := e.queueStatus(a.apiKey, r.str("queueId"))
			if q.str("device_fingerprint") != fp || q.str("sim_slot") != slot || q.str("pool") != "spread" {
				t.Fatalf("queue item %s, want %s %s", q.Raw, fp, slot)
			}
		}
	}
	for _, k := range []string{"rr-1/SIM1", "rr-2/SIM1", "rr-2/SIM2", "rr-3/SIM2"} {
		if count[k] != 10 {
			t.Errorf("member %s got %d sends, want 10 (%v)", k, count[k], count)
		}
	}
	e.eventually("every job reaches its phone", func() bool {
		return len(phones["rr-1"].Jobs()) == 10 && len(phones["rr-2"].Jobs()) == 20 && len(phones["rr-3"].Jobs()) == 10
	})
	for _, j := range phones["rr-3"].Jobs() {
		if j.SIMSlot != proto.SIM2 {
			t.Fatalf("rr-3 got a job from %s, want SIM2 only", j.SIMSlot)
		}
	}
	// A plain send answers as the contract shows: no pool fields.
	plain := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("rr-1", "+15551234567", "x", "")})
	e.want(plain, http.StatusOK, "")
	if len(plain.Body) != 2 {
		t.Fatalf("plain send answered %s, want {message, queueId}", plain.Raw)
	}

	msgs := make([]any, 8)
	for i := range msgs {
		msgs[i] = map[string]any{"phone": fmt.Sprintf("+1555200%04d", i), "message": "bulk"}
	}
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"pool": "spread", "messages": msgs}})
	e.want(r, http.StatusOK, "")
	routes := r.Body["routes"].([]any)
	bulkCount := map[string]int{}
	for _, rt := range routes {
		m := rt.(map[string]any)
		bulkCount[m["device_fingerprint"].(string)+"/"+m["sim_slot"].(string)]++
	}
	if len(routes) != 8 || len(bulkCount) != 4 || bulkCount["rr-1/SIM1"] != 2 || bulkCount["rr-3/SIM2"] != 2 {
		t.Fatalf("bulk routes %v, want 2 per member", bulkCount)
	}
	e.eventually("the bulk jobs reach their phones", func() bool {
		return len(phones["rr-1"].Jobs()) == 13 && len(phones["rr-2"].Jobs()) == 24 && len(phones["rr-3"].Jobs()) == 12
	})
}

// least_loaded sends to the member whose device has the fewest queued
// jobs: with three offline phones holding 6, 0 and 3 jobs, 9 sends bring
// every queue to 6 and none goes to the fullest.
func TestPoolLeastLoadedSpreads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for _, fp := range []string{"ll-1", "ll-2", "ll-3"} {
		e.pairPhone(a.apiKey, fp)
	}
	for fp, n := range map[string]int{"ll-1": 6, "ll-3": 3} {
		for i := range n {
			e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody(fp, fmt.Sprintf("+1555300%04d", i), "direct", "")}), http.StatusOK, "")
		}
	}
	e.createPool(a.apiKey, map[string]any{"name": "load", "strategy": "least_loaded", "members": members("ll-1", "SIM1", "ll-2", "SIM1", "ll-3", "SIM1")})
	count := map[string]int{}
	for i := range 9 {
		count[e.poolSend(a.apiKey, "load", fmt.Sprintf("+1555400%04d", i), "hi").str("device_fingerprint")]++
	}
	if count["ll-1"] != 0 || count["ll-2"] != 6 || count["ll-3"] != 3 {
		t.Fatalf("got %v, want ll-2 6, ll-3 3, ll-1 none", count)
	}
	// Equal queues share the sends in turn: 30 more, 10 each (tolerance 0).
	more := map[string]int{}
	for i := range 30 {
		more[e.poolSend(a.apiKey, "load", fmt.Sprintf("+1555500%04d", i), "hi").str("device_fingerprint")]++
	}
	for _, fp := range []string{"ll-1", "ll-2", "ll-3"} {
		if more[fp] != 10 {
			t.Errorf("with equal queues %s got %d, want 10 (%v)", fp, more[fp], more)
		}
	}
}

// sticky keeps each recipient on the member that last talked to it: the
// one the pool sent from before, or the one the recipient texted; a new
// recipient goes by the fallback strategy.
func TestPoolStickyKeepsRecipients(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	ph := map[string]*vphone{}
	for _, fp := range []string{"st-1", "st-2", "st-3"} {
		ph[fp] = e.runPhone(e.pairPhone(a.apiKey, fp), "BOTH", false)
	}
	// The recipient texted st-3's SIM2 before the pool existed.
	ack := <-ph["st-3"].Receive(proto.Inbound{ClientID: "in-1", From: "+15559990000", Message: "hello", SIMSlot: proto.SIM2, ReceivedAt: "2026-11-22T09:00:00Z"})
	if ack.ID == 0 {
		t.Fatalf("inbound ack %+v", ack)
	}
	e.createPool(a.apiKey, map[string]any{"name": "keep", "strategy": "sticky",
		"members": members("st-1", "SIM1", "st-2", "SIM1", "st-3", "SIM1", "st-3", "SIM2")})
	first := map[string]string{}
	count := map[string]int{}
	for round := range 3 {
		for i := range 8 {
			to := fmt.Sprintf("+1555600%04d", i)
			r := e.poolSend(a.apiKey, "keep", to, "hi")
			got := r.str("device_fingerprint") + "/" + r.str("sim_slot")
			if round == 0 {
				first[to] = got
				count[got]++
			} else if got != first[to] {
				t.Fatalf("round %d: %s went from %s, want %s as before", round, to, got, first[to])
			}
		}
	}
	for _, k := range []string{"st-1/SIM1", "st-2/SIM1", "st-3/SIM1", "st-3/SIM2"} {
		if count[k] != 2 {
			t.Errorf("new recipients: %s got %d, want 2 by round_robin (%v)", k, count[k], count)
		}
	}
	r := e.poolSend(a.apiKey, "keep", "+15559990000", "reply")
	if r.str("device_fingerprint") != "st-3" || r.str("sim_slot") != "SIM2" {
		t.Fatalf("reply to a recipient who texted st-3 SIM2 went from %s %s", r.str("device_fingerprint"), r.str("sim_slot"))
	}
	// The sticky member gone (disabled), the recipient moves, and stays moved.
	e.want(e.do(call{method: "PATCH", path: "/device/st-3", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	moved := e.poolSend(a.apiKey, "keep", "+15559990000", "again").str("device_fingerprint")
	if moved == "st-3" {
		t.Fatal("a send went to a disabled member")
	}
	e.want(e.do(call{method: "PATCH", path: "/device/st-3", token: a.apiKey, body: map[string]any{"status": "active"}}), http.StatusOK, "")
	if got := e.poolSend(a.apiKey, "keep", "+15559990000", "once more").str("device_fingerprint"); got != moved {
		t.Fatalf("after the move the recipient went from %s, want %s", got, moved)
	}
}

// documentedCodes are the error codes the served OpenAPI document shows as
// examples of one operation's answer with the given status; nil when the
// operation does not list that status.
func (e *env) documentedCodes(method, path string, status int) []string {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/openapi.json"})
	e.want(r, http.StatusOK, "")
	resolve := func(v any) map[string]any {
		m, _ := v.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			var node any = r.Body
			for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				node = node.(map[string]any)[part]
			}
			m, _ = node.(map[string]any)
		}
		return m
	}
	paths, _ := r.Body["paths"].(map[string]any)
	op, _ := resolve(paths[path])[strings.ToLower(method)].(map[string]any)
	answers, _ := op["responses"].(map[string]any)
	answer, ok := answers[strconv.Itoa(status)]
	if !ok {
		return nil
	}
	codes := []string{}
	content, _ := resolve(answer)["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	examples, _ := media["examples"].(map[string]any)
	for _, ex := range examples {
		value, _ := resolve(ex)["value"].(map[string]any)
		if code, ok := value["error"].(string); ok {
			codes = append(codes, code)
		}
	}
	return codes
}

// Every route that sends through a pool answers the pool's refusals
// (409 pool_unavailable, 429 pool_capped), and the OpenAPI document lists
// them under that route: POST /automation/send-sms, which takes the same
// body as /chat/send, listed neither.
func TestPoolRefusalsAreInTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "doc-1")
	e.setCaps(a.apiKey, "doc-1", map[string]any{"slot": "SIM1", "per_day": 1})
	e.createPool(a.apiKey, map[string]any{"name": "solo", "members": members("doc-1", "SIM1")})
	e.poolSend(a.apiKey, "solo", "+15559100000", "the day's one")

	bodies := map[string]map[string]any{
		"/chat/send":           {"pool": "solo", "phone": "+15559100001", "message": "x"},
		"/automation/send-sms": {"pool": "solo", "phone": "+15559100001", "message": "x"},
		"/chat/send-bulk":      {"pool": "solo", "messages": []any{map[string]any{"phone": "+15559100001", "message": "x"}}},
	}
	check := func(status int, code string) {
		t.Helper()
		for _, path := range slices.Sorted(maps.Keys(bodies)) {
			e.want(e.do(call{method: "POST", path: path, token: a.apiKey, body: bodies[path]}), status, code)
			if codes := e.documentedCodes("POST", path, status); !slices.Contains(codes, code) {
				t.Errorf("POST %s answers %d %s; the OpenAPI document shows %v under %d", path, status, code, codes, status)
			}
		}
	}
	check(http.StatusTooManyRequests, "pool_capped")
	e.want(e.do(call{method: "PATCH", path: "/device/doc-1", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	check(http.StatusConflict, "pool_unavailable")
}
