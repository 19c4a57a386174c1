package billing

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// lateProvider opens each session only once its call's time is spent, and
// meanwhile another request takes the company's checkout claim over: the
// request outlived its claim. It records the context each expiry gets.
type lateProvider struct {
	take func()

	mu      sync.Mutex
	expired map[string]error
}

func (p *lateProvider) Checkout(ctx context.Context, in CheckoutInput) (CheckoutSession, error) {
	p.take()
	<-ctx.Done()
	return CheckoutSession{ID: "cs_late", URL: "https://checkout.example/late", CustomerID: "cus_late", ExpiresAt: in.Now.Add(checkoutLifetime)}, nil
}

func (p *lateProvider) ExpireCheckout(ctx context.Context, id string) (bool, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expired[id] = ctx.Err()
	return false, "", ctx.Err()
}

func (p *lateProvider) Portal(context.Context, string, string) (string, error) { return "", nil }

// A session opened by a request that outlived its claim is not recorded,
// and is expired at the provider with time of its own. It got the
// request's calls' context, spent by then (the claim lapses only after
// it), so the session was never expired and could be paid for a day,
// unknown to the company's record.
func TestCheckoutOutlivingItsClaimExpiresItsSession(t *testing.T) {
	t.Parallel()
	st, co, p, svc := lateFixture(t)
	_, err := svc.Subscribe(context.Background(), SubscribeInput{CompanyID: co.ID, PlanID: PlanStarter})
	if !problem.Is(err, problem.Conflict) {
		t.Errorf("a subscribe that outlived its claim: %v, want 409", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if xerr, ok := p.expired["cs_late"]; !ok || xerr != nil {
		t.Errorf("the session not recorded: expired %v, with %v; want expired, with time left", ok, xerr)
	}
	// Nor its customer: the other request's session may be of another.
	if sub, _, err := st.Subscription(co.ID); err != nil || sub.Checkout == nil || sub.Checkout.Claim != "another-node" || sub.Checkout.SessionID != "" || sub.CustomerID != "" {
		t.Errorf("the record: %+v, customer %q, %v; want the other request's claim alone", sub.Checkout, sub.CustomerID, err)
	}
}

// A request that expired the company's open checkout (of another plan) and
// then outlived its claim forgets that session all the same: it is closed
// at the provider whoever holds the claim. It stayed recorded as open, so
// each subscribe of its plan answered its page, expired, for the day.
func TestCheckoutOutlivingItsClaimForgetsTheSessionItExpired(t *testing.T) {
	t.Parallel()
	st, co, p, svc := lateFixture(t)
	if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
		sub.Checkout = &store.Checkout{SessionID: "cs_pro", URL: "https://checkout.example/pro", PlanID: PlanPro, ExpiresAt: time.Now().Add(20 * time.Hour)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Subscribe(context.Background(), SubscribeInput{CompanyID: co.ID, PlanID: PlanStarter}); !problem.Is(err, problem.Conflict) {
		t.Errorf("a subscribe that outlived its claim: %v, want 409", err)
	}
	p.mu.Lock()
	_, expired := p.expired["cs_pro"]
	p.mu.Unlock()
	if !expired {
		t.Fatal("the open checkout of another plan was not expired")
	}
	if sub, _, err := st.Subscription(co.ID); err != nil || sub.Checkout == nil || sub.Checkout.Claim != "another-node" || sub.Checkout.SessionID != "" {
		t.Errorf("the record: %+v, %v; want the other request's claim alone, the expired session forgotten", sub.Checkout, err)
	}
}

// lateFixture is a store with one company, Acme, and lateService over it
// on a lateProvider whose every call sees another node take the company's
// checkout claim over, the rest of its checkout kept.
func lateFixture(t *testing.T) (store.Backend, store.Company, *lateProvider, *Service) {
	t.Helper()
	st := storetest.Open(t)
	co := storetest.Company(t, st, "Acme", "ana@acme.example")
	p := &lateProvider{expired: map[string]error{}}
	p.take = func() {
		if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
			if sub.Checkout == nil {
				sub.Checkout = &store.Checkout{}
			}
			sub.Checkout.Claim, sub.Checkout.ClaimedAt = "another-node", time.Now()
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	return st, co, p, lateService(t, st, p)
}

// lateService is a Stripe-mode service on p whose checkout calls are cut
// after 50 ms, so that a provider call outlives them at once.
func lateService(t *testing.T, st Store, p Provider) *Service {
	t.Helper()
	plans := BuiltinPlans()
	for i := range plans {
		if plans[i].Price.Amount > 0 {
			plans[i].StripePriceID = "price_" + plans[i].ID
		}
	}
	svc, err := New(Config{Plans: plans, PublicURL: "https://sms.example.com", WebhookSecret: "whsec_x", Provider: p}, st, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc.hold = 50 * time.Millisecond
	return svc
}
