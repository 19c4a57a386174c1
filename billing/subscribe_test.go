package billing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore).
func TestMain(m *testing.M) { storetest.Main(m) }

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
	const secret = "whsec_test_0123456789abcdef"
	st := &interleaved{Backend: storetest.Open(t)}
	co := storetest.Company(t, st, "Acme", "ana@acme.example")
	plans := billing.BuiltinPlans()
	for i := range plans {
		if plans[i].Price.Amount > 0 {
			plans[i].StripePriceID = "price_" + plans[i].ID
		}
	}
	const publicURL = "https://sms.example.com"
	svc, err := billing.New(billing.Config{Plans: plans, PublicURL: publicURL, WebhookSecret: secret,
		// Never called: the free plan needs no checkout.
		Provider: billing.NewStripe(billing.StripeConfig{Key: "sk_test_123", APIURL: "http://127.0.0.1:1"}),
	}, st, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "type": billing.EventSubscriptionCreated,
		"created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{
			"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": "active",
			"metadata": map[string]any{"company_id": fmt.Sprint(co.ID), "plan_id": billing.PlanStarter, "simrelay_instance": billing.InstanceMark(publicURL)},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret})
	st.then = func() {
		if err := svc.HandleStripeEvent(context.Background(), payload, signed.Header); err != nil {
			t.Errorf("the paid subscription's event: %v", err)
		}
	}
	_, err = svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanFree})
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
