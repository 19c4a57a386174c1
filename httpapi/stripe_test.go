package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/stripemock"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

const testWebhookSecret = "whsec_test_0123456789abcdef"

// stripePlans are the built-in plans with Stripe price ids.
func stripePlans() []billing.Plan {
	plans := billing.BuiltinPlans()
	for i := range plans {
		if plans[i].Price.Amount > 0 {
			plans[i].StripePriceID = "price_" + plans[i].ID
		}
	}
	return plans
}

func newStripeEnv(t *testing.T, apiURL string) *env {
	t.Helper()
	return newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{
		Plans: stripePlans(), WebhookSecret: testWebhookSecret,
		Provider: billing.NewStripe(billing.StripeConfig{Key: "sk_test_123", APIURL: apiURL, Timeout: 10 * time.Second}),
	})
}

// stripeEvent posts a Stripe event to the webhook, signed at the time of
// the server's clock.
func (e *env) stripeEvent(id, typ string, created int64, object map[string]any) resp {
	e.t.Helper()
	payload, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": created,
		"api_version": "2020-08-27", "data": map[string]any{"object": object}})
	if err != nil {
		e.t.Fatal(err)
	}
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: testWebhookSecret, Timestamp: e.clock.Now()})
	return e.do(call{method: "POST", path: "/billing/stripe/webhook", body: string(payload), header: map[string]string{"Stripe-Signature": signed.Header}})
}

// A signed event whose id, or its customer's or subscription's, no Stripe
// object has (past 255 bytes, or with a control character) is 400
// invalid_json and changes nothing. A 100,000-byte id was a 500 (the
// embedded store's key limit), which Stripe retries for three days.
func TestStripeEventIDsAreBounded(t *testing.T) {
	t.Parallel()
	e := newStripeEnv(t, "http://"+freeport.Addr(t))
	a := e.newCompany("Acme", "ana@acme.example")
	meta := map[string]any{"company_id": fmt.Sprint(uint64(a.id)), "plan_id": "starter", "simrelay_instance": billing.InstanceMark(e.url)}
	sub := map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": "active", "metadata": meta}
	now := time.Now().Unix()
	for _, id := range []string{"evt_" + strings.Repeat("x", 100000), "evt_" + strings.Repeat("x", 252), "evt_\u0000", "evt_ 1"} {
		r := e.stripeEvent(id, "customer.subscription.updated", now, sub)
		e.want(r, http.StatusBadRequest, "invalid_json")
		if !strings.Contains(r.str("message"), "id") {
			t.Fatalf("id of %d bytes: %s", len(id), r.Raw)
		}
	}
	r := e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	if r.str("status") != "active" || r.str("plan_id") != "free" {
		t.Fatalf("after refused events: %s", r.Raw)
	}
	long := map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_" + strings.Repeat("x", 100000), "status": "active", "metadata": meta}
	e.want(e.stripeEvent("evt_long_customer", "customer.subscription.updated", now, long), http.StatusBadRequest, "invalid_json")
	long = map[string]any{"id": "cs_1", "object": "checkout.session", "customer": "cus_A", "subscription": "sub_" + strings.Repeat("x", 300), "metadata": meta}
	e.want(e.stripeEvent("evt_long_subscription", "checkout.session.completed", now, long), http.StatusBadRequest, "invalid_json")
	// A data.object of null is no object, as a string is not.
	e.want(e.stripeEvent("evt_null_object", "customer.subscription.updated", now, nil), http.StatusBadRequest, "invalid_json")
	e.want(e.stripeEvent("evt_"+strings.Repeat("x", 251), "customer.subscription.updated", now, sub), http.StatusOK, "")
	r = e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	if r.str("plan_id") != "starter" {
		t.Fatalf("after an event with a 255-byte id: %s", r.Raw)
	}
}

// Stripe mode against stripe-mock: subscribe answers a Checkout URL and
// keeps (then reuses) the customer, portal answers a URL, members get 403,
// the other company sees nothing.
func TestStripeSubscribeAndPortal(t *testing.T) {
	t.Parallel()
	e := newStripeEnv(t, stripemock.Start(t))
	a := e.newCompany("Acme", "ana@acme.example")
	b := e.newCompany("Beta", "bo@beta.example")
	_, member := e.phonesInviteMember(a, "max@acme.example")

	r := e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
	e.want(r, http.StatusOK, "")
	if r.str("plan_id") != "free" || r.str("status") != "active" {
		t.Errorf("default plan in Stripe mode: %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/billing/portal", token: a.access}), http.StatusConflict, "conflict")
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: member, body: map[string]any{"plan_id": "starter"}}), http.StatusForbidden, "forbidden")
	e.want(e.do(call{method: "POST", path: "/billing/portal", token: member}), http.StatusForbidden, "forbidden")

	r = e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
	e.want(r, http.StatusOK, "")
	if !strings.HasPrefix(r.str("checkout_url"), "https://") || r.str("status") != "active" {
		t.Errorf("subscribe in Stripe mode: %s", r.Raw)
	}
	sub, _, err := e.store.Subscription(uint64(a.id))
	if err != nil || !strings.HasPrefix(sub.CustomerID, "cus_") || sub.PlanID != "" {
		t.Fatalf("after checkout: %+v %v", sub, err)
	}
	// A second checkout reuses the customer; skip_trial is accepted.
	r = e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "pro", "skip_trial": true}})
	e.want(r, http.StatusOK, "")
	again, _, _ := e.store.Subscription(uint64(a.id))
	if again.CustomerID != sub.CustomerID {
		t.Errorf("customer not reused: %q then %q", sub.CustomerID, again.CustomerID)
	}
	r = e.do(call{method: "POST", path: "/billing/portal", token: a.access})
	e.want(r, http.StatusOK, "")
	if !strings.HasPrefix(r.str("url"), "https://") {
		t.Errorf("portal: %s", r.Raw)
	}
	// The other company: untouched, no customer, its portal still 409.
	other, _, _ := e.store.Subscription(uint64(b.id))
	if other.CustomerID != "" {
		t.Errorf("other company got a customer: %+v", other)
	}
	e.want(e.do(call{method: "POST", path: "/billing/portal", token: b.access}), http.StatusConflict, "conflict")
}

// Every status through signed events, repeated and out of order; matched by
// metadata, then by the stored customer; a bad signature is 400.
func TestStripeWebhookTransitions(t *testing.T) {
	t.Parallel()
	e := newStripeEnv(t, "http://"+freeport.Addr(t))
	a := e.newCompany("Acme", "ana@acme.example")
	b := e.newCompany("Beta", "bo@beta.example")
	cid := fmt.Sprint(uint64(a.id))
	mark := billing.InstanceMark(e.url)
	meta := map[string]any{"company_id": cid, "plan_id": "starter", "simrelay_instance": mark}
	periodStart := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).Unix()
	periodEnd := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC).Unix()
	trialEnd := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).Unix()
	subObj := func(status string, metadata map[string]any) map[string]any {
		o := map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": status,
			"current_period_start": periodStart, "current_period_end": periodEnd}
		if status == "trialing" {
			o["trial_end"] = trialEnd
		}
		if metadata != nil {
			o["metadata"] = metadata
		}
		return o
	}
	view := func() resp {
		r := e.do(call{method: "GET", path: "/billing/subscription", token: a.access})
		e.want(r, http.StatusOK, "")
		return r
	}
	wantView := func(step, plan, status, trial string) {
		t.Helper()
		r := view()
		if r.str("plan_id") != plan || r.str("status") != status || r.str("trial_ends_at") != trial {
			t.Errorf("%s: got %s", step, r.Raw)
		}
	}

	// Bad and missing signatures: 400, nothing applied.
	payload := `{"id":"evt_bad","object":"event","type":"customer.subscription.updated","created":1,"data":{"object":{}}}`
	bad := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: []byte(payload), Secret: "whsec_other"})
	e.want(e.do(call{method: "POST", path: "/billing/stripe/webhook", body: payload, header: map[string]string{"Stripe-Signature": bad.Header}}), http.StatusBadRequest, "validation_failed")
	e.want(e.do(call{method: "POST", path: "/billing/stripe/webhook", body: payload}), http.StatusBadRequest, "validation_failed")

	const t0 = 1_795_000_000
	e.want(e.stripeEvent("evt_1", "checkout.session.completed", t0, map[string]any{"id": "cs_1", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_A", "client_reference_id": cid, "metadata": meta}), http.StatusOK, "")
	if sub, _, _ := e.store.Subscription(uint64(a.id)); sub.CustomerID != "cus_A" || sub.ProviderSubID != "sub_A" || sub.PlanID != "starter" {
		t.Fatalf("after checkout.session.completed: %+v", sub)
	}
	e.want(e.stripeEvent("evt_2", "customer.subscription.created", t0+1, subObj("trialing", meta)), http.StatusOK, "")
	wantView("trialing", "starter", "trialing", "2026-12-04T00:00:00.000Z")
	if r := view(); r.str("current_period_end") != "2026-12-20T00:00:00.000Z" {
		t.Errorf("period end: %s", r.Raw)
	}
	e.want(e.stripeEvent("evt_3", "customer.subscription.updated", t0+2, subObj("active", meta)), http.StatusOK, "")
	wantView("active", "starter", "active", "")
	// The same event id again, even with other content: applied once.
	e.want(e.stripeEvent("evt_2", "customer.subscription.created", t0+50, subObj("trialing", meta)), http.StatusOK, "")
	wantView("repeated event", "starter", "active", "")
	e.want(e.stripeEvent("evt_5", "customer.subscription.updated", t0+5, subObj("past_due", meta)), http.StatusOK, "")
	wantView("past_due", "starter", "past_due", "")
	// An older event arriving late leaves the newer state.
	e.want(e.stripeEvent("evt_4", "customer.subscription.updated", t0+4, subObj("active", meta)), http.StatusOK, "")
	wantView("out of order", "starter", "past_due", "")
	// Matched by the stored customer when the metadata is missing.
	e.want(e.stripeEvent("evt_6", "customer.subscription.deleted", t0+6, subObj("canceled", nil)), http.StatusOK, "")
	r := view()
	lim := r.Body["limits"].(map[string]any)
	if r.str("status") != "canceled" || lim["messages_per_month"] != float64(100) {
		t.Errorf("canceled falls back to the default plan's limits: %s", r.Raw)
	}
	// Unknown event types are acknowledged and ignored.
	e.want(e.stripeEvent("evt_7", "invoice.paid", t0+7, map[string]any{"id": "in_1", "object": "invoice"}), http.StatusOK, "")
	wantView("after an unknown type", "starter", "canceled", "")

	// The other company sees nothing of it.
	r = e.do(call{method: "GET", path: "/billing/subscription", token: b.access})
	e.want(r, http.StatusOK, "")
	if r.str("plan_id") != "free" || r.str("status") != "active" || r.Body["trial_ends_at"] != nil {
		t.Errorf("other company: %s", r.Raw)
	}
}

// A Stripe that cannot be reached answers 502 payment_provider_error,
// without Stripe's own words.
func TestStripeUnreachable(t *testing.T) {
	t.Parallel()
	e := newStripeEnv(t, "http://"+freeport.Addr(t))
	a := e.newCompany("Acme", "ana@acme.example")
	r := e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
	e.want(r, http.StatusBadGateway, "payment_provider_error")
	if _, err := e.store.UpdateSubscription(uint64(a.id), func(s *store.Subscription) error { s.CustomerID = "cus_X"; return nil }); err != nil {
		t.Fatal(err)
	}
	r2 := e.do(call{method: "POST", path: "/billing/portal", token: a.access})
	e.want(r2, http.StatusBadGateway, "payment_provider_error")
	for _, body := range [][]byte{r.Raw, r2.Raw} {
		low := strings.ToLower(string(body))
		if strings.Contains(low, "stripe") || strings.Contains(low, "127.0.0.1") || strings.Contains(low, "cus_") {
			t.Errorf("provider details leak: %s", body)
		}
	}
}

// Events are matched to companies safely: a company id without this
// server's mark (another server on the same Stripe account) matches
// nothing, a customer bound to one company never moves to another, a
// checkout completion arriving after the subscription's events does not
// hide their state, news of a replaced subscription is ignored, and the plan
// follows the subscription's price (a change made in the Billing Portal).
func TestStripeEventsStayWithTheirCompany(t *testing.T) {
	t.Parallel()
	e := newStripeEnv(t, "http://"+freeport.Addr(t))
	a := e.newCompany("Acme", "ana@acme.example")
	b := e.newCompany("Beta", "bo@beta.example")
	mark := billing.InstanceMark(e.url)
	metaOf := func(c company, withMark bool) map[string]any {
		m := map[string]any{"company_id": fmt.Sprint(uint64(c.id)), "plan_id": "starter"}
		if withMark {
			m["simrelay_instance"] = mark
		}
		return m
	}
	subOf := func(id, customer, status, price string, meta map[string]any) map[string]any {
		return map[string]any{"id": id, "object": "subscription", "customer": customer, "status": status, "metadata": meta,
			"items": map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_" + id, "object": "subscription_item",
				"price": map[string]any{"id": price, "object": "price"}}}}}
	}
	subscription := func(c company) store.Subscription {
		t.Helper()
		sub, _, err := e.store.Subscription(uint64(c.id))
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	const t0 = 1_795_000_000

	// Another server's event naming A's id: no mark, no known customer, nothing applied.
	e.want(e.stripeEvent("evt_x", "customer.subscription.created", t0, subOf("sub_X", "cus_X", "active", "price_pro", metaOf(a, false))), http.StatusOK, "")
	if sub := subscription(a); sub.CustomerID != "" || sub.Status != "" {
		t.Fatalf("an unmarked event was applied to A: %+v", sub)
	}

	// The checkout completion arrives after the subscription's first event.
	e.want(e.stripeEvent("evt_1", "customer.subscription.created", t0, subOf("sub_A", "cus_A", "active", "price_starter", metaOf(a, true))), http.StatusOK, "")
	e.want(e.stripeEvent("evt_2", "checkout.session.completed", t0+10, map[string]any{"id": "cs_1", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_A", "metadata": metaOf(a, true)}), http.StatusOK, "")
	if sub := subscription(a); sub.Status != "active" || sub.PlanID != "starter" || sub.CustomerID != "cus_A" {
		t.Fatalf("after the late checkout completion: %+v", sub)
	}
	// A later update at an older second than the checkout still applies:
	// the checkout completion is no mark of order.
	e.want(e.stripeEvent("evt_3", "customer.subscription.updated", t0+5, subOf("sub_A", "cus_A", "past_due", "price_starter", metaOf(a, true))), http.StatusOK, "")
	if sub := subscription(a); sub.Status != "past_due" {
		t.Fatalf("an update after the checkout completion: %+v", sub)
	}

	// B's marked id with A's customer: the customer stays A's, B unchanged.
	e.want(e.stripeEvent("evt_4", "customer.subscription.updated", t0+20, subOf("sub_A", "cus_A", "active", "price_pro", metaOf(b, true))), http.StatusOK, "")
	if sub := subscription(b); sub.CustomerID != "" || sub.Status != "" {
		t.Fatalf("A's customer reached B: %+v", sub)
	}
	if id, found, _ := e.store.CompanyByCustomer("cus_A"); !found || id != uint64(a.id) {
		t.Fatalf("cus_A now maps to company %d", id)
	}

	// The plan follows the price of the subscription's item.
	e.want(e.stripeEvent("evt_5", "customer.subscription.updated", t0+30, subOf("sub_A", "cus_A", "active", "price_pro", metaOf(a, true))), http.StatusOK, "")
	if sub := subscription(a); sub.PlanID != "pro" || sub.Status != "active" {
		t.Fatalf("after a price change in the portal: %+v", sub)
	}
	// News of another subscription of the same customer leaves the live one.
	e.want(e.stripeEvent("evt_6", "customer.subscription.deleted", t0+40, subOf("sub_OLD", "cus_A", "canceled", "price_starter", metaOf(a, true))), http.StatusOK, "")
	if sub := subscription(a); sub.Status != "active" || sub.ProviderSubID != "sub_A" {
		t.Fatalf("a replaced subscription's deletion moved the live one: %+v", sub)
	}

	// A paying company gets 409 for a second checkout and for the free plan;
	// a company paying nothing switches to free at once.
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}}), http.StatusConflict, "conflict")
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "free"}}), http.StatusConflict, "conflict")
	r := e.do(call{method: "POST", path: "/billing/subscribe", token: b.access, body: map[string]any{"plan_id": "free"}})
	e.want(r, http.StatusOK, "")
	if r.str("status") != "active" || r.str("checkout_url") != "" {
		t.Fatalf("free plan without a paid subscription: %s", r.Raw)
	}
}

// A company has at most one Checkout Session that can be paid. Subscribes
// at once (a double click, two admins, a retry after a timeout) open one
// session at Stripe and all answer its page; a subscribe for another plan
// expires it at Stripe before opening the next; once Stripe says the open
// one was paid, a subscribe answers 409 and opens nothing. Each subscribe
// opened a session of its own, and each could be paid: as many
// subscriptions billed.
func TestStripeOneOpenCheckout(t *testing.T) {
	t.Parallel()
	px := stripemock.NewProxy(t)
	e := newStripeEnv(t, px.URL)
	a := e.newCompany("Acme", "ana@acme.example")
	const create = "POST /v1/checkout/sessions"
	record := func() store.Checkout {
		t.Helper()
		sub, _, err := e.store.Subscription(uint64(a.id))
		if err != nil {
			t.Fatal(err)
		}
		if sub.Checkout == nil {
			return store.Checkout{}
		}
		return *sub.Checkout
	}

	// Stripe holds each session it creates until all the subscribes have
	// asked for one, or a second has passed: the subscribes overlap.
	const n = 4
	px.Hold(create, n)
	answers := make(chan resp, n)
	for range n {
		go func() {
			answers <- e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
		}()
	}
	var url string
	for range n {
		r := <-answers
		e.want(r, http.StatusOK, "")
		if url == "" {
			url = r.str("checkout_url")
		}
		if r.str("checkout_url") == "" || r.str("checkout_url") != url || r.str("status") != "active" {
			t.Errorf("subscribe at once: %s", r.Raw)
		}
	}
	px.Answer(nil)
	if got := px.Calls(create); got != 1 {
		t.Fatalf("%d subscribes at once opened %d Checkout Sessions, want 1", n, got)
	}
	first := record()
	if !strings.HasPrefix(first.SessionID, "cs_") || first.URL != url || first.PlanID != "starter" || first.Claim != "" {
		t.Fatalf("the open checkout: %+v", first)
	}
	// The same plan again: the same page, no new session.
	r := e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
	e.want(r, http.StatusOK, "")
	if r.str("checkout_url") != url || px.Calls(create) != 1 {
		t.Fatalf("the same plan again: %s, %d sessions", r.Raw, px.Calls(create))
	}

	// Another plan: the open session is expired at Stripe, then another opened.
	r = e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "pro", "skip_trial": true}})
	e.want(r, http.StatusOK, "")
	if px.Calls("POST /v1/checkout/sessions/"+first.SessionID+"/expire") != 1 || px.Calls(create) != 2 {
		t.Fatalf("another plan: the first session expired %d times, %d sessions opened",
			px.Calls("POST /v1/checkout/sessions/"+first.SessionID+"/expire"), px.Calls(create))
	}
	second := record()
	if second.SessionID == "" || second.SessionID == first.SessionID || second.PlanID != "pro" || !second.SkipTrial {
		t.Fatalf("the checkout of another plan: %+v", second)
	}

	// The pro session was paid (its events not here yet): Stripe refuses to
	// expire it, and reads it complete.
	px.Answer(func(w http.ResponseWriter, r *http.Request) bool {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/checkout/sessions/" + second.SessionID + "/expire":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"Only Checkout Sessions with a status in [\"open\"] can be expired."}}`))
			return true
		case "GET /v1/checkout/sessions/" + second.SessionID:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"id":%q,"object":"checkout.session","status":"complete","payment_status":"paid","subscription":"sub_paid"}`, second.SessionID)
			return true
		}
		return false
	})
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}}), http.StatusConflict, "conflict")
	if px.Calls(create) != 2 {
		t.Fatalf("a subscribe once the open checkout was paid opened a session (%d)", px.Calls(create))
	}
	if co := record(); co != (store.Checkout{}) {
		t.Fatalf("the paid checkout is still recorded as open: %+v", co)
	}

	// A paid checkout still recorded (its completion event was never
	// applied) whose subscription the company held and has ended: a new
	// checkout opens.
	if _, err := e.store.UpdateSubscription(uint64(a.id), func(sub *store.Subscription) error {
		sub.ProviderSubID, sub.PlanID, sub.Status, sub.Checkout = "sub_paid", "pro", "canceled", &second
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r = e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}})
	e.want(r, http.StatusOK, "")
	if px.Calls(create) != 3 || record().SessionID == second.SessionID {
		t.Fatalf("a checkout after the held subscription ended: %s, %d sessions, %+v", r.Raw, px.Calls(create), record())
	}
}

// Stripe sends the payer's browser back to the Checkout Session's
// success_url once paid, or to its cancel_url: both must be pages of the
// server. They were /billing/success and /billing/canceled, which nothing
// serves: a company that had just paid landed on a JSON 404.
func TestStripeCheckoutReturnsToTheConsole(t *testing.T) {
	t.Parallel()
	px := stripemock.NewProxy(t)
	e := newStripeEnv(t, px.URL)
	a := e.newCompany("Acme", "ana@acme.example")
	var mu sync.Mutex
	var form url.Values
	px.Answer(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method+" "+r.URL.Path == "POST /v1/checkout/sessions" {
			raw, err := io.ReadAll(r.Body)
			if err != nil {
				t.Error(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(raw))
			v, err := url.ParseQuery(string(raw))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			form = v
			mu.Unlock()
		}
		return false
	})
	e.want(e.do(call{method: "POST", path: "/billing/subscribe", token: a.access, body: map[string]any{"plan_id": "starter"}}), http.StatusOK, "")
	mu.Lock()
	defer mu.Unlock()
	for _, field := range []string{"success_url", "cancel_url"} {
		u := form.Get(field)
		if u != e.url+"/console/billing" {
			t.Errorf("%s %q, want the console's billing page %s/console/billing", field, u, e.url)
			continue
		}
		// Followed as a browser that is not signed in yet does: to the
		// console's sign-in page, which leads back to the billing page.
		res, err := testhttp.Client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.HasPrefix(res.Request.URL.Path, "/console/") {
			t.Errorf("%s %s: the browser lands on %s, %d %s; want a console page", field, u, res.Request.URL, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
}

// A yearly plan's messages_per_month is a month's allowance: within the
// Stripe period of a year, messages count a month at a time, months
// counted from the period's start, and the next month's allowance comes
// with it. The whole year was the window: a yearly plan of 2 messages a
// month refused the third message of the year. GET /billing/subscription
// shows the month's count and the billing period's end.
func TestYearlyPlanAllowsItsMessagesEveryMonth(t *testing.T) {
	t.Parallel()
	perMonth := int64(2)
	plans := append(stripePlans(), billing.Plan{ID: "yearly", Name: "Yearly", Price: billing.Price{Amount: 9000, Currency: "usd", Interval: "year"},
		Features: []string{}, Limits: billing.Limits{MessagesPerMonth: &perMonth}, StripePriceID: "price_yearly"})
	e := newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{Plans: plans, WebhookSecret: testWebhookSecret,
		Provider: billing.NewStripe(billing.StripeConfig{Key: "sk_test_123", APIURL: "http://" + freeport.Addr(t), Timeout: 10 * time.Second})})
	a := e.newCompany("Acme", "ana@acme.example")
	e.pairPhone(a.apiKey, "a-phone")
	// A year from 2026-09-15; the clock is at 2026-11-22.
	start := time.Date(2026, 9, 15, 0, 0, 0, 0, time.UTC)
	meta := map[string]any{"company_id": fmt.Sprint(uint64(a.id)), "plan_id": "yearly", "simrelay_instance": billing.InstanceMark(e.url)}
	e.want(e.stripeEvent("evt_yearly", "customer.subscription.updated", e.clock.Now().Unix(), map[string]any{
		"id": "sub_Y", "object": "subscription", "customer": "cus_Y", "status": "active", "metadata": meta,
		"current_period_start": start.Unix(), "current_period_end": start.AddDate(1, 0, 0).Unix(),
		"items": map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_Y", "object": "subscription_item",
			"price": map[string]any{"id": "price_yearly", "object": "price"}}}}}), http.StatusOK, "")

	send := func() resp {
		return e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "hi", "")})
	}
	for i := range perMonth {
		if r := send(); r.Status >= 300 {
			t.Fatalf("send %d: %d %s", i+1, r.Status, r.Raw)
		}
	}
	e.want(send(), http.StatusTooManyRequests, "plan_limit_reached")
	r := e.do(call{method: "GET", path: "/billing/subscription", token: a.apiKey})
	if u, _ := r.Body["usage"].(map[string]any); r.str("plan_id") != "yearly" || u == nil || u["messages_this_period"] != float64(2) ||
		r.str("current_period_end") != "2027-09-15T00:00:00.000Z" {
		t.Errorf("in the month from 2026-11-15: %s", r.Raw)
	}
	// The dashboard's credits count over the same month.
	r = e.do(call{method: "GET", path: "/dashboard/summary", token: a.apiKey})
	if p, _ := r.Body["period"].(map[string]any); p == nil || p["from"] != "2026-11-15T00:00:00.000Z" || p["to"] != "2026-12-15T00:00:00.000Z" {
		t.Errorf("dashboard in the month from 2026-11-15: %s", r.Raw)
	}

	// The next month of the year: its own 2 messages.
	e.clock.Advance(time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now()))
	r = e.do(call{method: "GET", path: "/billing/subscription", token: a.apiKey})
	if u, _ := r.Body["usage"].(map[string]any); u == nil || u["messages_this_period"] != float64(0) {
		t.Errorf("in the month from 2026-12-15: %s", r.Raw)
	}
	for i := range perMonth {
		if r := send(); r.Status >= 300 {
			t.Fatalf("send %d in the next month: %d %s", i+1, r.Status, r.Raw)
		}
	}
	e.want(send(), http.StatusTooManyRequests, "plan_limit_reached")
}
