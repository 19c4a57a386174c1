package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A PATCH of a pool that changes nothing ({}, or the values it has) leaves
// it as it was, updated_at included; one that changes something moves it.
// (A WhatsApp number or iMessage handle does the same in the store, which
// store/conformance checks: the API does not show their updated_at.)
func TestPoolPatchThatChangesNothingKeepsUpdatedAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")
	pool := e.createPool(a.apiKey, map[string]any{"name": "sales", "strategy": "sticky", "members": members("a-1", "SIM1", "a-1", "SIM2"),
		"window": map[string]any{"days": []string{"mon"}, "from": "09:00", "to": "17:00", "time_zone": "Europe/Paris"}})
	path := "/pools/" + strconv.Itoa(int(pool.Body["id"].(float64)))
	for _, body := range []map[string]any{{}, {"name": "sales", "strategy": "sticky"}, {"members": members("a-1", "SIM1", "a-1", "SIM2")}} {
		e.clock.Advance(time.Minute)
		r := e.do(call{method: "PATCH", path: path, token: a.apiKey, body: body})
		e.want(r, http.StatusOK, "")
		if string(r.Raw) != string(pool.Raw) {
			t.Errorf("PATCH %v answered %s, want the pool as it was: %s", body, r.Raw, pool.Raw)
		}
	}
	e.clock.Advance(time.Minute)
	r := e.do(call{method: "PATCH", path: path, token: a.apiKey, body: map[string]any{"name": "Sales"}})
	e.want(r, http.StatusOK, "")
	if r.str("updated_at") == pool.str("updated_at") {
		t.Errorf("a rename left updated_at at %s, want it moved", r.str("updated_at"))
	}
}
