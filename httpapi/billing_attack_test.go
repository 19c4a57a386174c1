package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/stripemock"
	"github.com/simrelay/simrelay/webhook"
)

// TestStripeWebhookForgeries: what a hostile network can send the webhook
// without the signing secret, or with a signature of Stripe's it caught,
// changes nothing: a signature older than the tolerance (five minutes, a
// captured delivery replayed later), one dated more than the tolerance
// ahead (one such capture would pass the age check until its date, and the
// tolerance after), a body changed under a good signature, a header whose
// v1 signs another timestamp than the one it names, one with only a v0
// (test-mode) scheme, an empty header. Each is 400
// validation_failed naming Stripe-Signature. A good signature over an event
// id applied already (a capture replayed within the tolerance, or Stripe's
// own retry, re-signed) is acknowledged and applies nothing.
func TestStripeWebhookForgeries(t *testing.T) {
	t.Parallel()
	e := newStripeEnv(t, "http://"+freeport.Addr(t))
	a := e.newCompany("Acme", "ana@acme.example")
	meta := map[string]any{"company_id": fmt.Sprint(uint64(a.id)), "plan_id": "pro", "simrelay_instance": billing.InstanceMark(e.url)}
	sub := func(status string) map[string]any {
		return map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": status, "metadata": meta}
	}
	payload := func(id, status string, created int64) []byte {
		b, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": "customer.subscription.updated", "created": created,
			"api_version": "2020-08-27", "data": map[string]any{"object": sub(status)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	post := func(body []byte, header string) resp {
		return e.do(call{method: "POST", path: "/billing/stripe/webhook", body: string(body), header: map[string]string{"Stripe-Signature": header}})
	}
	now := e.clock.Now() // the server's
	body := payload("evt_forged", "active", now.Unix())
	old := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: testWebhookSecret, Timestamp: now.Add(-6 * time.Minute)})
	ahead := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: testWebhookSecret, Timestamp: now.Add(10 * time.Minute)})
	good := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: testWebhookSecret, Timestamp: now})
	otherTime := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: testWebhookSecret, Timestamp: now.Add(-time.Second)})
	tampered := []byte(strings.Replace(string(body), `"active"`, `"trialing"`, 1))
	for name, c := range map[string]struct {
		body   []byte
		header string
	}{
		"a signature past the tolerance":     {body, old.Header},
		"a signature ahead of the tolerance": {body, ahead.Header},
		"a body changed under its signature": {tampered, good.Header},
		"v1 of another timestamp":            {body, fmt.Sprintf("t=%d,v1=%s", now.Unix(), otherTime.Header[strings.Index(otherTime.Header, "v1=")+3:])},
		"v0 only":                            {body, fmt.Sprintf("t=%d,v0=%s", now.Unix(), good.Header[strings.Index(good.Header, "v1=")+3:])},
		"empty":                              {body, ""},
		"a timestamp that is no number":      {body, "t=now," + good.Header[strings.Index(good.Header, "v1="):]},
	} {
		r := post(c.body, c.header)
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "Stripe-Signature" {
			t.Errorf("%s: got %s, want field Stripe-Signature", name, r.Raw)
		}
	}
	if s := e.do(call{method: "GET", path: "/billing/subscription", token: a.access}); s.str("plan_id") != "free" {
		t.Fatalf("after the forgeries: %s", s.Raw)
	}
	e.want(post(body, good.Header), http.StatusOK, "")
	if s := e.do(call{method: "GET", path: "/billing/subscription", token: a.access}); s.str("plan_id") != "pro" || s.str("status") != "active" {
		t.Fatalf("after the signed event: %s", s.Raw)
	}
	// The same event id, re-signed, with another status: applied once.
	again := payload("evt_forged", "canceled", now.Unix()+60)
	resigned := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: again, Secret: testWebhookSecret, Timestamp: now})
	e.want(post(again, resigned.Header), http.StatusOK, "")
	e.want(post(body, good.Header), http.StatusOK, "")
	if s := e.do(call{method: "GET", path: "/billing/subscription", token: a.access}); s.str("plan_id") != "pro" || s.str("status") != "active" {
		t.Fatalf("after the replays: %s", s.Raw)
	}
}

// TestPlanLoweredWhileSendsWait: a plan lowered below what the company has
// sent this period keeps every send it accepted, queued and scheduled alike
// (each counted when accepted, as docs/billing.md says: nothing answered
// 2xx is taken back), and refuses new sends, single and bulk, with 429
// plan_limit_reached, the contract's error body and a Retry-After to the
// period's end.
func TestPlanLoweredWhileSendsWait(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(`{"plans":[
		{"id":"big","name":"Big","price":{"amount":0,"currency":"usd","interval":"month"},"trial_days":0,"features":[],"limits":{"messages_per_month":10,"devices":2}},
		{"id":"tiny","name":"Tiny","price":{"amount":0,"currency":"usd","interval":"month"},"trial_days":0,"features":[],"limits":{"messages_per_month":3,"devices":1}}
	]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	plans, err := billing.LoadPlans(path)
	if err != nil {
		t.Fatal(err)
	}
	e := newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{Plans: plans, DefaultPlan: "big"})
	a := e.newCompany("Acme", "ana@acme.example")
	reg := e.pairPhone(a.apiKey, "a-phone")
	e.pairPhone(a.apiKey, "b-phone")
	var ids []string
	for i := range 2 {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", fmt.Sprint("now ", i), "")})
		e.want(r, http.StatusOK, "")
		ids = append(ids, r.str("queueId"))
	}
	at := e.clock.Now().Add(time.Hour)
	for i := range 3 {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "+15551234567", fmt.Sprint("later ", i), at)})
		e.want(r, http.StatusOK, "")
		ids = append(ids, r.str("queueId"))
	}
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "tiny"}}), http.StatusOK, "")
	s := e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	if u := s.Body["usage"].(map[string]any); s.str("plan_id") != "tiny" || u["messages_this_period"] != float64(5) || u["devices"] != float64(2) {
		t.Fatalf("after the lowering: %s", s.Raw)
	}
	wantRetry := int(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now()).Seconds())
	for _, c := range []struct {
		path string
		body any
	}{
		{"/chat/send", sendBody("a-phone", "+15551234567", "over", "")},
		{"/chat/send-bulk", map[string]any{"device_fingerprint": "a-phone", "messages": []any{map[string]any{"phone": "+15551234567", "message": "over"}}}},
	} {
		r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: c.body})
		e.want(r, http.StatusTooManyRequests, "plan_limit_reached")
		if got := retryAfter(r); got != wantRetry {
			t.Errorf("%s: Retry-After %d, want %d (the period's end)", c.path, got, wantRetry)
		}
		for k := range r.Body {
			if k != "error" && k != "message" && k != "field" {
				t.Errorf("%s: the error body has %q: %s", c.path, k, r.Raw)
			}
		}
	}
	// Every accepted send goes out: the queued ones at once, the scheduled
	// ones at their time.
	phone := e.runPhone(reg, "BOTH", false)
	e.eventually("the queued sends reach the phone", func() bool { return len(phone.Jobs()) == 2 })
	e.clock.Advance(time.Hour)
	e.sms.ReleaseDue()
	e.eventually("the scheduled sends reach the phone", func() bool { return len(phone.Jobs()) == 5 })
	for i, j := range phone.Jobs() {
		if j.ID != ids[i] {
			t.Errorf("job %d: %s, want %s", i, j.ID, ids[i])
		}
	}
	if s := e.do(call{method: "GET", path: "/billing/subscription", token: a.apiKey}); s.Status != http.StatusOK || s.Body["usage"].(map[string]any)["messages_this_period"] != float64(5) {
		t.Errorf("the released sends counted again: %d %s", s.Status, s.Raw)
	}
}

// TestCloseTheCompanyRacingItsCheckout: DELETE /company while a subscribe
// of the company is opening a Checkout Session at Stripe (Stripe slow to
// answer) is 409 conflict, and so is it once the session is open and can be
// paid: a company removed with a payable session would be billed, once
// paid, for a subscription no company holds. Once the session expired (its
// checkout.session.expired event), the company closes.
func TestCloseTheCompanyRacingItsCheckout(t *testing.T) {
	t.Parallel()
	px := stripemock.NewProxy(t)
	e := newStripeEnv(t, px.URL)
	a := e.newCompany("Acme Racing", "ana@racing.example")
	const create = "POST /v1/checkout/sessions"
	asked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	px.Answer(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method+" "+r.URL.Path == create {
			once.Do(func() { close(asked) })
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
		return false
	})
	subscribed := make(chan resp, 1)
	go func() {
		subscribed <- e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
	}()
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the subscribe never asked Stripe for a session")
	}
	confirm := map[string]any{"confirm": "Acme Racing"}
	e.want(e.do(call{method: "DELETE", path: "/company", token: a.access, body: confirm}), http.StatusConflict, "conflict")
	close(release)
	r := <-subscribed
	e.want(r, http.StatusOK, "")
	if r.str("checkout_url") == "" {
		t.Fatalf("subscribe: %s", r.Raw)
	}
	e.want(e.do(call{method: "DELETE", path: "/company", token: a.access, body: confirm}), http.StatusConflict, "conflict")
	sub, _, err := e.store.Subscription(uint64(a.id))
	if err != nil || sub.Checkout == nil || sub.Checkout.SessionID == "" {
		t.Fatalf("the open checkout: %+v, %v", sub, err)
	}
	meta := map[string]any{"company_id": fmt.Sprint(uint64(a.id)), "plan_id": "starter", "simrelay_instance": billing.InstanceMark(e.url)}
	e.want(e.stripeEvent("evt_expired", "checkout.session.expired", time.Now().Unix(),
		map[string]any{"id": sub.Checkout.SessionID, "object": "checkout.session", "metadata": meta}), http.StatusOK, "")
	e.want(e.do(call{method: "DELETE", path: "/company", token: a.access, body: confirm}), http.StatusAccepted, "")
	if px.Calls(create) != 1 {
		t.Errorf("%d sessions opened, want 1", px.Calls(create))
	}
}
