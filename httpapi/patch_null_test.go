package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
)

// nullRefused asserts a change's answer is the contract's 400 naming field.
func (e *env) nullRefused(r resp, field string) {
	e.t.Helper()
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != field {
		e.t.Errorf("got field %q (%s), want %q", r.str("field"), r.Raw, field)
	}
}

// sameJSON asserts two answers' values of key are equal.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: got %s, want %s", what, g, w)
	}
}

// In a PATCH of a pool, null clears fallback and failover_after (as "" and
// 0: the sticky default, no failover) and takes the window away; null on
// name, strategy or members is 400 naming the field and changes nothing;
// a field left out keeps its value (docs/api.md, "null in a change").
func TestPoolPatchNull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")
	win := map[string]any{"from": "09:00", "to": "17:00", "time_zone": "UTC"}
	p := e.createPool(a.apiKey, map[string]any{"name": "sales", "strategy": "sticky", "fallback": "least_loaded",
		"failover_after": 120, "window": win, "members": members("a-1", "SIM1")})
	path := "/pools/" + strconv.Itoa(int(p.Body["id"].(float64)))
	patch := func(body map[string]any) resp {
		return e.do(call{method: "PATCH", path: path, token: a.apiKey, body: body})
	}
	read := func() resp {
		r := e.do(call{method: "GET", path: path, token: a.apiKey})
		e.want(r, http.StatusOK, "")
		return r
	}

	for _, f := range []string{"name", "strategy", "members"} {
		e.nullRefused(patch(map[string]any{f: nil}), f)
		// Refused with a good change beside it: nothing of it is stored.
		e.nullRefused(patch(map[string]any{f: nil, "failover_after": 300}), f)
	}
	sameJSON(t, "after refused nulls", read().Body, p.Body)

	// Absent fields stay; a null clears its own field only.
	r := patch(map[string]any{"failover_after": nil})
	e.want(r, http.StatusOK, "")
	if r.Body["failover_after"] != 0.0 || r.str("fallback") != "least_loaded" || r.str("strategy") != "sticky" || r.Body["window"] == nil {
		t.Fatalf("failover_after null: got %s, want failover_after 0 and the rest as it was", r.Raw)
	}
	r = patch(map[string]any{"fallback": nil})
	e.want(r, http.StatusOK, "")
	if r.str("fallback") != "round_robin" || r.Body["failover_after"] != 0.0 || r.Body["window"] == nil {
		t.Fatalf("fallback null: got %s, want the sticky default round_robin", r.Raw)
	}
	r = patch(map[string]any{"window": nil})
	e.want(r, http.StatusOK, "")
	if v, ok := r.Body["window"]; !ok || v != nil || r.str("name") != "sales" {
		t.Fatalf("window null: got %s, want window null", r.Raw)
	}
	sameJSON(t, "members after clears", read().Body["members"], p.Body["members"])

	// On a pool that is not sticky a null fallback is the "" it has.
	e.want(patch(map[string]any{"strategy": "round_robin", "fallback": nil}), http.StatusOK, "")

	// The same body defines a pool: null on a field that cannot be
	// cleared is refused there too; a cleared one is its empty state.
	e.nullRefused(e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "p", "strategy": nil, "members": members("a-1", "SIM1")}}), "strategy")
	e.nullRefused(e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "p", "members": nil}}), "members")
	c := e.createPool(a.apiKey, map[string]any{"name": "p", "failover_after": nil, "window": nil, "members": members("a-1", "SIM1")})
	if c.Body["failover_after"] != 0.0 || c.Body["window"] != nil {
		t.Fatalf("created with nulls: got %s, want no failover and no window", c.Raw)
	}
}

// In a PATCH of a WhatsApp number or an iMessage handle, null clears the
// number's own caps (each, or all) and gap, back to the server's defaults;
// null on status, or on one end of a gap, is 400 naming the field; a field
// left out keeps its value.
func TestAgentNumberPatchNull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	for _, path := range []string{"/whatsapp/numbers/" + e.numberID(a.apiKey, "whatsapp", waNumber), "/imessage/handles/" + e.numberID(a.apiKey, "imessage", imHandle)} {
		patch := func(body map[string]any) resp {
			r := e.do(call{method: "PATCH", path: path, token: a.apiKey, body: body})
			return r
		}
		def := patch(map[string]any{})
		e.want(def, http.StatusOK, "")
		own := patch(map[string]any{"caps": map[string]any{"per_minute": 2, "per_hour": 50, "per_day": 100}, "gap_seconds": map[string]any{"min": 1, "max": 1.5}, "status": "paused"})
		e.want(own, http.StatusOK, "")
		caps := func(r resp) map[string]any { return r.Body["caps"].(map[string]any) }

		e.nullRefused(patch(map[string]any{"status": nil}), "status")
		e.nullRefused(patch(map[string]any{"status": nil, "caps": nil}), "status")
		e.nullRefused(patch(map[string]any{"gap_seconds": map[string]any{"min": nil, "max": 2}}), "gap_seconds.min")
		sameJSON(t, path+" after refused nulls", patch(map[string]any{}).Body, own.Body)

		r := patch(map[string]any{"caps": map[string]any{"per_minute": nil}})
		e.want(r, http.StatusOK, "")
		if caps(r)["per_minute"] != caps(def)["per_minute"] || caps(r)["per_hour"] != caps(own)["per_hour"] || caps(r)["per_day"] != caps(own)["per_day"] {
			t.Fatalf("%s caps.per_minute null: got %s, want the default per_minute %v and the rest kept", path, r.Raw, caps(def)["per_minute"])
		}
		sameJSON(t, path+" gap kept", r.Body["gap_seconds"], own.Body["gap_seconds"])
		if r.str("status") != "paused" {
			t.Fatalf("%s: got %s, want status kept", path, r.Raw)
		}
		r = patch(map[string]any{"gap_seconds": nil})
		e.want(r, http.StatusOK, "")
		sameJSON(t, path+" gap null", r.Body["gap_seconds"], def.Body["gap_seconds"])
		r = patch(map[string]any{"caps": nil})
		e.want(r, http.StatusOK, "")
		sameJSON(t, path+" caps null", r.Body["caps"], def.Body["caps"])
		e.want(patch(map[string]any{"status": "active"}), http.StatusOK, "")
	}
}
