package billing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/stripemock"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore)
// and the stripe-mock the tests share (stripemock.Start).
func TestMain(m *testing.M) { os.Exit(stripemock.Run(m, storetest.Run)) }

const (
	testSecret    = "whsec_test_0123456789abcdef"
	testPublicURL = "https://sms.example.com"
)

// acme is a store with one company, Acme, whose admin is ana@acme.example.
func acme(t *testing.T) (store.Backend, store.Company) {
	t.Helper()
	st := storetest.Open(t)
	return st, storetest.Company(t, st, "Acme", "ana@acme.example")
}

// starterMeta is the metadata of company's checkouts and subscriptions of
// the starter plan, opened by this instance.
func starterMeta(company uint64) map[string]any {
	return map[string]any{"company_id": fmt.Sprint(company), "plan_id": billing.PlanStarter, "simrelay_instance": billing.InstanceMark(testPublicURL)}
}

// stripeService is billing in Stripe mode over st, with the built-in
// plans priced in Stripe. Its provider is never reached.
func stripeService(t *testing.T, st billing.Store) *billing.Service {
	t.Helper()
	return stripeServiceAt(t, st, "http://127.0.0.1:1", slog.New(slog.DiscardHandler), time.Now)
}

// mockedService is billing in Stripe mode over st with Stripe's API behind
// px, a proxy of stripe-mock, and the clock now. It logs nothing.
func mockedService(t *testing.T, st billing.Store, px *stripemock.Proxy, now func() time.Time) *billing.Service {
	t.Helper()
	return stripeServiceAt(t, st, px.URL, slog.New(slog.DiscardHandler), now)
}

// stripeServiceAt is billing in Stripe mode over st with Stripe's API at
// apiURL, logging to log.
func stripeServiceAt(t *testing.T, st billing.Store, apiURL string, log *slog.Logger, now func() time.Time) *billing.Service {
	t.Helper()
	plans := billing.BuiltinPlans()
	for i := range plans {
		if plans[i].Price.Amount > 0 {
			plans[i].StripePriceID = "price_" + plans[i].ID
		}
	}
	svc, err := billing.New(billing.Config{Plans: plans, PublicURL: testPublicURL, WebhookSecret: testSecret,
		Provider: billing.NewStripe(billing.StripeConfig{Key: "sk_test_123", APIURL: apiURL, Timeout: 10 * time.Second}),
	}, st, log, now)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// subscriptionEvent is a signed customer.subscription.created event of
// company's subscription sub_A on the starter plan, with the object's
// other fields; it returns the payload and its Stripe-Signature.
func subscriptionEvent(t *testing.T, company uint64, fields map[string]any) ([]byte, string) {
	t.Helper()
	object := map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": "active",
		"metadata": starterMeta(company)}
	for k, v := range fields {
		object[k] = v
	}
	payload, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "type": billing.EventSubscriptionCreated,
		"created": time.Now().Unix(), "data": map[string]any{"object": object}})
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testSecret})
	return payload, signed.Header
}

// interleaved is the real store, with one call run before the next write
// of a subscription: a Stripe event that lands between what the caller
// read before and that write.
type interleaved struct {
	store.Backend
	then func()
}

func (s *interleaved) UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error) {
	if then := s.then; then != nil {
		s.then = nil
		then()
	}
	return s.Backend.UpdateSubscription(companyID, fn)
}

// TestFreePlanDoesNotOverwriteAPaidCheckout: subscribing to the free plan
// (no Stripe price, no checkout) while the company's checkout of a paid
// plan is being applied answers 409 once the paid subscription is there,
// and leaves it. It was judged on a read before the write: the paid
// subscription applied in between was overwritten with the free plan, and
// the company paid for a plan it did not have until Stripe's next event.
func TestFreePlanDoesNotOverwriteAPaidCheckout(t *testing.T) {
	t.Parallel()
	backend, co := acme(t)
	st := &interleaved{Backend: backend}
	svc := stripeService(t, st)
	payload, signature := subscriptionEvent(t, co.ID, nil)
	st.then = func() {
		if err := svc.HandleStripeEvent(context.Background(), payload, signature); err != nil {
			t.Errorf("the paid subscription's event: %v", err)
		}
	}
	_, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanFree})
	if !problem.Is(err, problem.Conflict) {
		t.Errorf("the free plan once the company pays: got %v, want 409 conflict", err)
	}
	sub, _, err := st.Subscription(co.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sub.PlanID != billing.PlanStarter || sub.Status != billing.StatusActive || sub.ProviderSubID != "sub_A" {
		t.Errorf("the subscription: %+v, want the paid starter plan, active", sub)
	}
}

// TestStripePeriodOfTheSubscriptionItem: from Stripe's API version
// 2025-03-31 (basil) on, a subscription's billing period is its items'
// (items.data[].current_period_start and _end), and the subscription
// carries none. The event's period was read as none: the messages counted
// over the calendar month, not the period Stripe bills.
func TestStripePeriodOfTheSubscriptionItem(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	svc := stripeService(t, st)
	// A period that is no calendar month and holds now.
	start := time.Now().UTC().Truncate(time.Second).Add(-36 * time.Hour)
	end := start.AddDate(0, 1, 0)
	payload, signature := subscriptionEvent(t, co.ID, map[string]any{"items": map[string]any{"object": "list", "data": []any{
		map[string]any{"id": "si_A", "object": "subscription_item", "price": map[string]any{"id": "price_starter", "object": "price"},
			"current_period_start": start.Unix(), "current_period_end": end.Unix()},
	}}})
	if err := svc.HandleStripeEvent(context.Background(), payload, signature); err != nil {
		t.Fatal(err)
	}
	from, to := svc.Period(co.ID)
	if !from.Equal(start) || !to.Equal(end) {
		t.Errorf("the period: %s to %s, want the item's, %s to %s", from, to, start, end)
	}
}

// TestStripeSignatureAheadOfTime: a delivery signed less than the tolerance
// (five minutes) ahead of the server's clock is applied, as Stripe's clock
// may run ahead; one signed further ahead is 400 naming Stripe-Signature
// and applies nothing, as one signed that long ago is. The library refused
// only the late one.
func TestStripeSignatureAheadOfTime(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	svc := stripeService(t, st)
	payload, _ := subscriptionEvent(t, co.ID, nil)
	sign := func(at time.Time) string {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testSecret, Timestamp: at}).Header
	}
	now := time.Now()
	for name, at := range map[string]time.Time{"ten minutes ahead": now.Add(10 * time.Minute), "ten minutes late": now.Add(-10 * time.Minute)} {
		err := svc.HandleStripeEvent(context.Background(), payload, sign(at))
		if !problem.Is(err, problem.ValidationFailed) || !strings.Contains(err.Error(), "Stripe-Signature") {
			t.Errorf("signed %s: got %v, want 400 naming Stripe-Signature", name, err)
		}
	}
	if sub, found, err := st.Subscription(co.ID); err != nil || found && sub.ProviderSubID != "" {
		t.Fatalf("after the refused deliveries: %+v (found %v, %v), want none applied", sub, found, err)
	}
	if err := svc.HandleStripeEvent(context.Background(), payload, sign(now.Add(time.Minute))); err != nil {
		t.Fatalf("signed a minute ahead: %v", err)
	}
	if sub, _, err := st.Subscription(co.ID); err != nil || sub.ProviderSubID != "sub_A" {
		t.Errorf("after the delivery signed a minute ahead: %+v (%v), want sub_A applied", sub, err)
	}
}

// TestStripeSignatureTimedByTheServiceClock: a delivery's signature is
// dated against the service's clock (the one billing is made with, which
// times its periods, trials and checkouts), both ways: one signed at its
// time is applied, however far the machine's clock is from it; one signed
// at the machine's time, a day past the service's, is 400 naming
// Stripe-Signature. The library's check of a late one, and the check of
// one ahead, read the machine's clock.
func TestStripeSignatureTimedByTheServiceClock(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	at := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	svc := stripeServiceAt(t, st, "http://127.0.0.1:1", slog.New(slog.DiscardHandler), func() time.Time { return at })
	payload, _ := subscriptionEvent(t, co.ID, nil)
	sign := func(at time.Time) string {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testSecret, Timestamp: at}).Header
	}
	if err := svc.HandleStripeEvent(context.Background(), payload, sign(time.Now())); !problem.Is(err, problem.ValidationFailed) || !strings.Contains(err.Error(), "Stripe-Signature") {
		t.Errorf("signed a day past the service's clock: got %v, want 400 naming Stripe-Signature", err)
	}
	if sub, found, err := st.Subscription(co.ID); err != nil || found && sub.ProviderSubID != "" {
		t.Fatalf("after the refused delivery: %+v (found %v, %v), want none applied", sub, found, err)
	}
	if err := svc.HandleStripeEvent(context.Background(), payload, sign(at.Add(-time.Minute))); err != nil {
		t.Fatalf("signed a minute before the service's clock: %v", err)
	}
	if sub, _, err := st.Subscription(co.ID); err != nil || sub.ProviderSubID != "sub_A" {
		t.Errorf("after the delivery signed at the service's time: %+v (%v), want sub_A applied", sub, err)
	}
}
