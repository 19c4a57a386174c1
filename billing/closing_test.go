package billing_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A subscribe that was let in as its company's closing began (the closing
// mark committed after its credential was checked) finds the company gone:
// 404 not_found, as a removed company's ids answer, not a server fault, and
// no checkout claimed or opened (this Stripe is out of reach: a call would
// answer payment_provider_error).
func TestSubscribeOfAClosingCompany(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	if _, err := st.MarkCompanyClosing(co.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	selfHosted, err := billing.New(billing.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for name, svc := range map[string]*billing.Service{"self-hosted": selfHosted, "stripe": stripeService(t, st)} {
		_, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
		if !problem.Is(err, problem.NotFound) {
			t.Errorf("%s: a subscribe of a closing company: %v, want 404 not_found", name, err)
		}
	}
	if sub, found, err := st.Subscription(co.ID); err != nil || found {
		t.Errorf("the closing company's subscription: %+v (found %v, %v), want none written", sub, found, err)
	}
}
