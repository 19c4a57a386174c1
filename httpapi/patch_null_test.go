package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
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

// sameJSON asserts got and want are the same JSON (what names them).
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
			return e.do(call{method: "PATCH", path: path, token: a.apiKey, body: body})
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

// The changes published with "an absent or null field stays as it is"
// (PATCH /users/me, /users/{id}, /company, /device/{fp}) keep it, for the
// clients written to it; "" and 0 clear there. The two PUTs read null as
// left out, and refuse it where a value is required.
func TestPublishedNullsStay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")
	do := func(method, path, token string, body map[string]any) resp {
		return e.do(call{method: method, path: path, token: token, body: body})
	}

	me := do("PATCH", "/users/me", a.access, map[string]any{"phone": "+1 555 010 0001", "lastName": "Admin"})
	e.want(me, http.StatusOK, "")
	r := do("PATCH", "/users/me", a.access, map[string]any{"firstName": nil, "lastName": nil, "phone": nil})
	e.want(r, http.StatusOK, "")
	sameJSON(t, "PATCH /users/me nulls", r.Body, me.Body)
	if r = do("PATCH", "/users/me", a.access, map[string]any{"phone": ""}); r.str("phone") != "" || r.str("firstName") != "Ana" {
		t.Errorf(`phone "": got %s, want it cleared and the rest kept`, r.Raw)
	}
	user := "/users/" + strconv.Itoa(int(a.adminID))
	before := do("GET", "/users/me", a.access, nil)
	r = do("PATCH", user, a.apiKey, map[string]any{"firstName": nil, "role": nil})
	e.want(r, http.StatusOK, "")
	sameJSON(t, "PATCH /users/{id} nulls", r.Body, before.Body)

	co := do("PATCH", "/company", a.apiKey, map[string]any{"address": "1 Main St", "region": "US"})
	e.want(co, http.StatusOK, "")
	r = do("PATCH", "/company", a.apiKey, map[string]any{"name": nil, "phone": nil, "address": nil, "country": nil, "region": nil, "emailDevice": nil, "optOutKeywords": nil})
	e.want(r, http.StatusOK, "")
	sameJSON(t, "PATCH /company nulls", r.Body, co.Body)

	d := do("PATCH", "/device/a-1", a.apiKey, map[string]any{"sms_per_minute": 20, "selected_sim": "SIM1"})
	e.want(d, http.StatusOK, "")
	r = do("PATCH", "/device/a-1", a.apiKey, map[string]any{"device_name": nil, "selected_sim": nil, "status": nil, "sms_per_minute": nil})
	e.want(r, http.StatusOK, "")
	for _, k := range []string{"device_name", "selected_sim", "status", "sms_per_minute"} {
		sameJSON(t, "PATCH /device nulls: "+k, r.Body[k], d.Body[k])
	}

	caps := do("PUT", "/device/a-1/caps", a.apiKey, map[string]any{"sims": []any{map[string]any{"slot": "SIM1", "per_day": 10, "per_month": 100}, map[string]any{"slot": "SIM2", "per_day": 5}}})
	e.want(caps, http.StatusOK, "")
	e.nullRefused(do("PUT", "/device/a-1/caps", a.apiKey, map[string]any{"sims": nil}), "sims")
	e.nullRefused(do("PUT", "/device/a-1/caps", a.apiKey, map[string]any{"sims": []any{map[string]any{"slot": nil, "per_day": 1}}}), "sims[0].slot")
	r = do("PUT", "/device/a-1/caps", a.apiKey, map[string]any{"sims": []any{map[string]any{"slot": "SIM1", "per_day": nil, "per_month": 100}}})
	e.want(r, http.StatusOK, "")
	sims := r.Body["sims"].([]any)
	if s1, s2 := sims[0].(map[string]any), sims[1].(map[string]any); s1["per_day"] != nil || s1["per_month"] != 100.0 || s2["per_day"] != 5.0 {
		t.Errorf("PUT caps with per_day null: got %s, want SIM1 without a day cap, SIM2 kept", r.Raw)
	}

	e.nullRefused(do("PUT", "/webhooks/inbound-sms", a.apiKey, map[string]any{"webhooks": nil}), "webhooks")
	e.nullRefused(do("PUT", "/webhooks/inbound-sms", a.apiKey, map[string]any{"webhooks": []any{map[string]any{"url": nil}}}), "webhooks[0].url")
	r = do("PUT", "/webhooks/inbound-sms", a.apiKey, map[string]any{"webhooks": []any{map[string]any{"url": "https://hooks.example.com/in",
		"active": nil, "devices": nil, "sims": nil, "channels": nil, "wa_numbers": nil, "im_handles": nil, "events": nil, "id": nil}}})
	e.want(r, http.StatusOK, "")
	w := r.Body["webhooks"].([]any)[0].(map[string]any)
	if w["active"] != true || len(w["devices"].([]any)) != 0 || len(w["channels"].([]any)) != 0 {
		t.Errorf("PUT webhooks with nulls: got %s, want an active entry for everything", r.Raw)
	}
}

// A change's fields that tell null apart still answer a wrong type with
// its whole path, indexes included, and a number too big for its field
// with the field's own range.
func TestChangeFieldsNameTheirPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")
	p := e.createPool(a.apiKey, map[string]any{"name": "sales", "members": members("a-1", "SIM1")})
	path := "/pools/" + strconv.Itoa(int(p.Body["id"].(float64)))
	for _, c := range []struct {
		body        string
		field, text string
	}{
		{`{"members":[{"device_fingerprint":"a-1"},{"device_fingerprint":"a-1","sim_slot":5}]}`, "members[1].sim_slot", "must be a string"},
		{`{"window":{"from":"09:00","to":"17:00","time_zone":"UTC","days":["mon",7]}}`, "window.days[1]", "must be a string"},
		{`{"failover_after":1e30}`, "failover_after", "must be 0 (no failover) or 60 to 604800 seconds"},
		{`{"failover_after":99999999999999999999}`, "failover_after", "must be 0 (no failover) or 60 to 604800 seconds"},
		{`{"failover_after":"60"}`, "failover_after", "must be a whole number"},
		{`{"name":["x"]}`, "name", "must be a string"},
	} {
		r := e.do(call{method: "PATCH", path: path, token: a.apiKey, body: c.body})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != c.field || !strings.Contains(r.str("message"), c.text) {
			t.Errorf("%s: got %s, want field %s saying %q", c.body, r.Raw, c.field, c.text)
		}
	}
}
