package httpapi_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/webhook"
)

// The built-in plans are the contract's, with their amounts in cents; the
// hidden unlimited plan is not listed.
func TestBillingPlansAreTheContracts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.example")
	r := e.do(call{method: "GET", path: "/plans", token: a.access})
	e.want(r, http.StatusOK, "")
	plans, _ := r.Body["plans"].([]any)
	type want struct {
		amount, trial  float64
		messages, devs float64
	}
	wants := map[string]want{"free": {0, 0, 100, 1}, "starter": {900, 14, 2000, 3}, "pro": {4900, 14, 25000, 20}}
	if len(plans) != len(wants) {
		t.Fatalf("got %d plans, want %d: %s", len(plans), len(wants), r.Raw)
	}
	for _, p := range plans {
		pm := p.(map[string]any)
		w, ok := wants[pm["id"].(string)]
		if !ok {
			t.Fatalf("unexpected plan %v", pm["id"])
		}
		price := pm["price"].(map[string]any)
		lim := pm["limits"].(map[string]any)
		if price["amount"] != w.amount || price["currency"] != "usd" || price["interval"] != "month" || pm["trial_days"] != w.trial ||
			lim["messages_per_month"] != w.messages || lim["devices"] != w.devs {
			t.Errorf("plan %v: %v", pm["id"], pm)
		}
	}
	// Before any subscribe: the default plan (unlimited without Stripe), active, null limits.
	r = e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	e.want(r, http.StatusOK, "")
	lim := r.Body["limits"].(map[string]any)
	if r.str("plan_id") != "unlimited" || r.str("status") != "active" || lim["messages_per_month"] != nil || lim["devices"] != nil ||
		r.str("current_period_end") != "2026-12-01T00:00:00.000Z" || r.Body["trial_ends_at"] != nil {
		t.Errorf("default subscription: %s", r.Raw)
	}
}

// Self-hosted: subscribe switches at once (trialing or active with
// skip_trial), portal is 409 billing_disabled, members get 403, another
// company sees nothing of it.
func TestBillingSelfHostedSubscribe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.example")
	b := e.newCompany("Beta", "bo@beta.example")
	_, member := e.phonesInviteMember(a, "max@acme.example")

	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: member, body: map[string]any{"plan_id": "starter"}}), http.StatusForbidden, "forbidden")
	e.want(e.do(call{method: "POST", path: "/billing/portal", token: member}), http.StatusForbidden, "forbidden")
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "unlimited"}}), http.StatusBadRequest, "validation_failed")
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{}}), http.StatusBadRequest, "validation_failed")

	r := e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
	e.want(r, http.StatusOK, "")
	if r.str("status") != "trialing" || r.Body["checkout_url"] != nil {
		t.Errorf("subscribe starter: %s", r.Raw)
	}
	r = e.do(call{method: "GET", path: "/billing/subscription", token: member})
	e.want(r, http.StatusOK, "")
	if r.str("plan_id") != "starter" || r.str("plan_name") != "Starter" || r.str("status") != "trialing" || r.str("trial_ends_at") != "2026-12-06T10:00:00.000Z" {
		t.Errorf("after subscribe: %s", r.Raw)
	}
	// The other company is untouched.
	r = e.do(call{method: "GET", path: "/billing/subscription", token: b.apiKey})
	if r.str("plan_id") != "unlimited" || r.str("status") != "active" || r.Body["trial_ends_at"] != nil {
		t.Errorf("another company sees %s", r.Raw)
	}

	r = e.do(call{method: "POST", path: "/billing/subscribe", token: a.apiKey, body: map[string]any{"plan_id": "pro", "skip_trial": true}})
	e.want(r, http.StatusOK, "")
	if r.str("status") != "active" {
		t.Errorf("skip_trial: %s", r.Raw)
	}
	r = e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	if r.str("plan_id") != "pro" || r.str("status") != "active" || r.Body["trial_ends_at"] != nil {
		t.Errorf("after skip_trial: %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/billing/portal", token: a.access}), http.StatusConflict, "billing_disabled")
}

// tinyPlans is a plans file with small limits, so boundaries are reached in a few calls.
func tinyPlans(t *testing.T) []billing.Plan {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(`{"plans":[
		{"id":"tiny","name":"Tiny","price":{"amount":100,"currency":"usd","interval":"month"},"trial_days":0,"features":[],"limits":{"messages_per_month":3,"devices":2}}
	]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.LoadPlans(path)
	if err != nil {
		t.Fatal(err)
	}
	return plans
}

// The message limit refuses the send after the last allowed one, on both
// send routes, stores nothing, and starts again with the next calendar month.
// The device limit refuses the registration after the last allowed device.
func TestBillingLimitsAtTheirBoundaries(t *testing.T) {
	t.Parallel()
	e := newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{Plans: tinyPlans(t), DefaultPlan: "tiny"})
	a := e.newCompany("Acme", "ana@acme.example")
	b := e.newCompany("Beta", "bo@beta.example")
	e.pairPhone(a.apiKey, "a-phone-1")
	e.pairPhone(a.apiKey, "a-phone-2")
	r := e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(a.apiKey), "a-phone-3"))
	e.want(r, http.StatusForbidden, "plan_limit_reached")
	// Re-registering a device the company has is no new device.
	e.want(e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(a.apiKey), "a-phone-2")), http.StatusCreated, "")

	send := func(path string) resp {
		return e.do(call{method: "POST", path: path, token: a.apiKey, body: sendBody("a-phone-1", "+15551234567", "hi", "")})
	}
	for i, path := range []string{"/chat/send", "/automation/send-sms", "/chat/send"} {
		if r := send(path); r.Status >= 300 {
			t.Fatalf("send %d: %d %s", i+1, r.Status, r.Raw)
		}
	}
	for _, path := range []string{"/chat/send", "/automation/send-sms"} {
		r := send(path)
		e.want(r, http.StatusTooManyRequests, "plan_limit_reached")
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", path)
		}
	}
	r = e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	usage := r.Body["usage"].(map[string]any)
	if usage["messages_this_period"] != float64(3) || usage["devices"] != float64(2) {
		t.Errorf("usage: %s", r.Raw)
	}
	r = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone-1&phone=%2B15551234567", token: a.apiKey})
	if msgs, _ := r.Body["messages"].([]any); len(msgs) != 3 {
		t.Errorf("want the 3 accepted messages stored, got %d: %s", len(msgs), r.Raw)
	}
	// Another company's allowance is its own.
	e.pairPhone(b.apiKey, "b-phone")
	if r := e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: sendBody("b-phone", "+15551234567", "hi", "")}); r.Status >= 300 {
		t.Fatalf("company b: %d %s", r.Status, r.Raw)
	}

	// The period rolls over with the calendar month (UTC).
	e.clock.Advance(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now()))
	r = e.do(call{method: "GET", path: "/billing/subscription", token: a.apiKey})
	if u, _ := r.Body["usage"].(map[string]any); u == nil || u["messages_this_period"] != float64(0) || r.str("current_period_end") != "2027-01-01T00:00:00.000Z" {
		t.Errorf("after rollover: %s", r.Raw)
	}
	for range 3 {
		if r := send("/chat/send"); r.Status >= 300 {
			t.Fatalf("after rollover: %d %s", r.Status, r.Raw)
		}
	}
	e.want(send("/chat/send"), http.StatusTooManyRequests, "plan_limit_reached")
}

// The refusals say the plan's limits as a person would: "1 device" and
// "1 message" on a plan of one, "2 devices" and "3 messages" on one of more.
func TestBillingLimitMessagesCountRight(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(`{"plans":[
		{"id":"single","name":"Single","price":{"amount":100,"currency":"usd","interval":"month"},"trial_days":0,"features":[],"limits":{"messages_per_month":1,"devices":1}}
	]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	single, err := billing.LoadPlans(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		plans                 []billing.Plan
		plan                  string
		devices, messages     int
		deviceMsg, messageMsg string
	}{
		{single, "single", 1, 1,
			"The company's plan allows 1 device and it is registered; delete it or choose a larger plan.",
			"The plan allows 1 message per billing period and it is used; it renews at 2026-12-01T00:00:00Z, or choose a larger plan."},
		{tinyPlans(t), "tiny", 2, 3,
			"The company's plan allows 2 devices and they are registered; delete one or choose a larger plan.",
			"The plan allows 3 messages per billing period and they are used; it renews at 2026-12-01T00:00:00Z, or choose a larger plan."},
	} {
		t.Run(c.plan, func(t *testing.T) {
			t.Parallel()
			e := newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{Plans: c.plans, DefaultPlan: c.plan})
			a := e.newCompany("Acme", "ana@acme.example")
			for i := 1; i <= c.devices; i++ {
				e.pairPhone(a.apiKey, fmt.Sprintf("phone-%d", i))
			}
			r := e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(a.apiKey), "one-more"))
			e.want(r, http.StatusForbidden, "plan_limit_reached")
			if got := r.str("message"); got != c.deviceMsg {
				t.Errorf("device refusal: got %q, want %q", got, c.deviceMsg)
			}
			for i := 1; i <= c.messages; i++ {
				if r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("phone-1", "+15551234567", "hi", "")}); r.Status >= 300 {
					t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
				}
			}
			r = e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("phone-1", "+15551234567", "hi", "")})
			e.want(r, http.StatusTooManyRequests, "plan_limit_reached")
			if got := r.str("message"); got != c.messageMsg {
				t.Errorf("message refusal: got %q, want %q", got, c.messageMsg)
			}
		})
	}
}

// A plans file is checked at start; the error names the plan and the field.
func TestBillingPlansFileValidation(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(`{"plans":[{"id":"gold","name":"Gold","price":{"amount":100,"currency":"USD","interval":"month"},"features":[],"limits":{"messages_per_month":null,"devices":1}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := billing.LoadPlans(path)
	if err == nil || !strings.Contains(err.Error(), `plan "gold"`) || !strings.Contains(err.Error(), "price.currency") {
		t.Errorf("got %v, want an error naming plan gold and price.currency", err)
	}
}
