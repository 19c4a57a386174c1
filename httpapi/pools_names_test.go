package httpapi_test

import (
	"net/http"
	"testing"
)

// A pool is named without regard to case, and a send through it records
// the pool's own name, not the spelling of the request: the answer, the
// queue item and a bulk send's routes say "Sales" however the send wrote
// it, so a client grouping its sends by pool finds the names GET /pools
// lists. They carried the request's spelling ("SALES", "sales").
func TestPoolSendsCarryThePoolsName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "pn-1")
	e.createPool(a.apiKey, map[string]any{"name": "Équipe-Sales", "members": members("pn-1", "SIM1")})

	r := e.poolSend(a.apiKey, "ÉQUIPE-SALES", "+15559200001", "hi")
	if r.str("pool") != "Équipe-Sales" {
		t.Errorf("the send's answer names pool %q, want the pool's name Équipe-Sales", r.str("pool"))
	}
	q := e.do(call{method: "GET", path: "/chat/queue/" + r.str("queueId"), token: a.apiKey})
	e.want(q, http.StatusOK, "")
	if q.str("pool") != "Équipe-Sales" {
		t.Errorf("the queue item names pool %q, want Équipe-Sales", q.str("pool"))
	}
	b := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"pool": "équipe-sales",
		"messages": []any{map[string]any{"phone": "+15559200002", "message": "hi"}}}})
	e.want(b, http.StatusOK, "")
	routes, _ := b.Body["routes"].([]any)
	if len(routes) != 1 || routes[0].(map[string]any)["pool"] != "Équipe-Sales" {
		t.Errorf("the bulk send's routes: %v, want the pool's name Équipe-Sales", routes)
	}
}
