package httpapi_test

import (
	"net/http"
	"testing"
)

// The contract's boolean inputs take true/false and 1/0 (as numbers or
// strings), as PATCH /company's optOutKeywords does: a webhook entry's
// active and the subscribe's skip_trial took true and false alone, and
// answered 1 and 0 with 400.
func TestBooleanInputsTakeOneAndZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")

	for _, c := range []struct {
		active any
		want   bool
	}{{0, false}, {1, true}, {"0", false}, {"1", true}, {"false", false}, {"TRUE", true}, {false, false}, {nil, true}} {
		r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []any{
			map[string]any{"url": "https://hooks.example.com/in", "active": c.active}}}})
		e.want(r, http.StatusOK, "")
		list, _ := r.Body["webhooks"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["active"] != c.want {
			t.Errorf("active %#v: got %s, want active %v", c.active, r.Raw, c.want)
		}
	}
	for _, bad := range []any{2, -1, "yes", "", 1.5, []any{}} {
		r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []any{
			map[string]any{"url": "https://hooks.example.com/in"}, map[string]any{"url": "https://hooks.example.com/b", "active": bad}}}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "webhooks[1].active" {
			t.Errorf("active %#v: field %q, want webhooks[1].active", bad, r.str("field"))
		}
	}

	for _, c := range []struct {
		skip any
		want string
	}{{1, "active"}, {0, "trialing"}, {"1", "active"}, {"false", "trialing"}, {true, "active"}} {
		r := e.do(call{method: "POST", path: "/billing/subscribe", token: a.apiKey, body: map[string]any{"plan_id": "starter", "skip_trial": c.skip}})
		e.want(r, http.StatusOK, "")
		if got := r.str("status"); got != c.want {
			t.Errorf("skip_trial %#v: status %q, want %q (%s)", c.skip, got, c.want, r.Raw)
		}
	}
	r := e.do(call{method: "POST", path: "/billing/subscribe", token: a.apiKey, body: map[string]any{"plan_id": "starter", "skip_trial": "yes"}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "skip_trial" {
		t.Errorf("skip_trial yes: field %q, want skip_trial", r.str("field"))
	}
}
