package billing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/stripemock"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

const createSession = "POST /v1/checkout/sessions"

// signedEvent is a signed Stripe event of the type with the object, and its
// Stripe-Signature.
func signedEvent(t *testing.T, id, typ string, created int64, object map[string]any) ([]byte, string) {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": created, "data": map[string]any{"object": object}})
	if err != nil {
		t.Fatal(err)
	}
	return payload, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: testSecret}).Header
}

// handle applies a signed event; it must be acknowledged.
func handle(t *testing.T, svc *billing.Service, id, typ string, created int64, object map[string]any) {
	t.Helper()
	payload, signature := signedEvent(t, id, typ, created, object)
	if err := svc.HandleStripeEvent(context.Background(), payload, signature); err != nil {
		t.Fatalf("event %s: %v", id, err)
	}
}

func subscription(t *testing.T, st billing.Store, company uint64) store.Subscription {
	t.Helper()
	sub, _, err := st.Subscription(company)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// Two nodes of a cluster on one database, each serving subscribes of the
// same company at once, open one Checkout Session between them: the claim
// is in the company's subscription record, not in a node's memory.
func TestCheckoutOneSessionAcrossNodes(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	px := stripemock.NewProxy(t)
	nodes := []*billing.Service{
		mockedService(t, st, px, time.Now),
		mockedService(t, st, px, time.Now),
	}
	// Stripe holds each session it creates until every subscribe has asked
	// for one, or a second has passed: the subscribes overlap.
	const n = 4
	px.Hold(createSession, n)
	type answer struct {
		res billing.SubscribeResult
		err error
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			res, err := nodes[i%2].Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
			answers <- answer{res, err}
		}()
	}
	for range n {
		a := <-answers
		if a.err != nil || !strings.HasPrefix(a.res.CheckoutURL, "https://") {
			t.Errorf("a subscribe: %+v, %v", a.res, a.err)
		}
	}
	if got := px.Calls(createSession); got != 1 {
		t.Fatalf("%d subscribes on two nodes opened %d Checkout Sessions, want 1", n, got)
	}
	if sub := subscription(t, st, co.ID); sub.Checkout == nil || sub.Checkout.Claim != "" || sub.Checkout.SessionID == "" {
		t.Fatalf("the open checkout: %+v", sub.Checkout)
	}
}

// A claim of a node that stopped mid-way is taken over once it is older
// than any node holds one; a live claim makes another subscribe wait, and
// answer 409 when its wait ends, having opened nothing.
func TestCheckoutClaim(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	px := stripemock.NewProxy(t)
	now := time.Now().UTC()
	svc := mockedService(t, st, px, func() time.Time { return now })
	claim := func(at time.Time) {
		t.Helper()
		if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
			sub.Checkout = &store.Checkout{Claim: "another-node", ClaimedAt: at}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	claim(now.Add(-time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := svc.Subscribe(ctx, billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
	if !problem.Is(err, problem.Conflict) || px.Calls(createSession) != 0 {
		t.Fatalf("a subscribe while another node opens a checkout: %v, %d sessions opened", err, px.Calls(createSession))
	}

	claim(now.Add(-3 * time.Minute))
	res, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
	if err != nil || res.CheckoutURL == "" || px.Calls(createSession) != 1 {
		t.Fatalf("a subscribe after a stale claim: %+v, %v, %d sessions opened", res, err, px.Calls(createSession))
	}
	if sub := subscription(t, st, co.ID); sub.Checkout == nil || sub.Checkout.Claim != "" {
		t.Fatalf("the claim after the checkout: %+v", sub.Checkout)
	}

	// The same plan again answers the open page, with the company's status.
	if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
		sub.PlanID, sub.Status, sub.ProviderSubID = billing.PlanPro, billing.StatusCanceled, "sub_old"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
	if err != nil || again.CheckoutURL != res.CheckoutURL || again.Status != billing.StatusCanceled || px.Calls(createSession) != 1 {
		t.Fatalf("the same plan again: %+v, %v, %d sessions opened", again, err, px.Calls(createSession))
	}
}

// countedStore counts the subscription record's reads and write
// transactions.
type countedStore struct {
	billing.Store
	reads, writes atomic.Int64
}

func (c *countedStore) Subscription(companyID uint64) (store.Subscription, bool, error) {
	c.reads.Add(1)
	return c.Store.Subscription(companyID)
}

func (c *countedStore) UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error) {
	c.writes.Add(1)
	return c.Store.UpdateSubscription(companyID, fn)
}

// A subscribe waiting for another request's claim reads the record while
// it waits, and takes a write transaction again only once the claim has
// ended: waiting subscribes do not queue on the store's writer.
func TestCheckoutWaitReads(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	px := stripemock.NewProxy(t)
	now := time.Now().UTC()
	counted := &countedStore{Store: st}
	svc := mockedService(t, counted, px, func() time.Time { return now })
	setClaim := func(claim string) {
		t.Helper()
		if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
			sub.Checkout = &store.Checkout{Claim: claim, ClaimedAt: now.Add(-time.Second)}
			if claim == "" {
				sub.Checkout = nil
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	setClaim("another-node")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := svc.Subscribe(ctx, billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter}); !problem.Is(err, problem.Conflict) {
		t.Fatalf("a subscribe while another node opens a checkout: %v", err)
	}
	if got := counted.writes.Load(); got != 1 {
		t.Fatalf("a subscribe that waited out a held claim took %d write transactions, want 1 (its first try)", got)
	}

	// The claim ends while a subscribe waits: it takes the claim then.
	counted.reads.Store(0)
	counted.writes.Store(0)
	type answer struct {
		res billing.SubscribeResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
		done <- answer{res, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); counted.reads.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the subscribe never read the record while it waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := counted.writes.Load(); got != 1 {
		t.Fatalf("a waiting subscribe took %d write transactions, want 1 (its first try)", got)
	}
	setClaim("")
	a := <-done
	if a.err != nil || a.res.CheckoutURL == "" || px.Calls(createSession) != 1 {
		t.Fatalf("a subscribe after the claim ended: %+v, %v, %d sessions opened", a.res, a.err, px.Calls(createSession))
	}
	if sub := subscription(t, st, co.ID); sub.Checkout == nil || sub.Checkout.Claim != "" || sub.Checkout.SessionID == "" {
		t.Fatalf("the open checkout: %+v", sub.Checkout)
	}
}

// checkout.session.completed tells the subscription's first state: paid is
// active, no payment required on a plan with a trial is trialing, unpaid
// (a bank debit on its way) is none. It was left as it was (canceled, of
// the company's previous subscription) until the subscription's own event,
// so a company that had just paid read as canceled, on the free plan's
// limits. A completion arriving after the subscription's events leaves
// their state, and it forgets the company's open checkout.
func TestCheckoutCompletedStatus(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	svc := stripeService(t, st)
	created := time.Now().Unix()
	for i, c := range []struct {
		payment, status string
		trial           bool
	}{
		{"paid", billing.StatusActive, false},
		{"no_payment_required", billing.StatusTrialing, true},
		{"unpaid", billing.StatusNone, false},
	} {
		co := storetest.Company(t, st, fmt.Sprint("Acme ", i), fmt.Sprintf("ana%d@acme.example", i))
		cid := fmt.Sprint(co.ID)
		meta := starterMeta(co.ID)
		// An earlier subscription, canceled; a checkout open.
		if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
			sub.PlanID, sub.Status, sub.ProviderSubID, sub.CustomerID = billing.PlanPro, billing.StatusCanceled, "sub_old"+cid, "cus_"+cid
			sub.Checkout = &store.Checkout{SessionID: "cs_" + cid, URL: "https://checkout.example/" + cid, PlanID: billing.PlanStarter, ExpiresAt: time.Now().Add(time.Hour)}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		handle(t, svc, "evt_done"+cid, billing.EventCheckoutCompleted, created, map[string]any{"id": "cs_" + cid, "object": "checkout.session",
			"customer": "cus_" + cid, "subscription": "sub_new" + cid, "status": "complete", "payment_status": c.payment, "metadata": meta})
		view, err := svc.Subscription(context.Background(), co.ID)
		if err != nil {
			t.Fatal(err)
		}
		if view.PlanID != billing.PlanStarter || view.Status != c.status || (view.TrialEndsAt != nil) != c.trial {
			t.Errorf("payment_status %s: %+v, want starter, %s", c.payment, view, c.status)
		}
		if sub := subscription(t, st, co.ID); sub.ProviderSubID != "sub_new"+cid || sub.Checkout != nil {
			t.Errorf("payment_status %s: the record %+v", c.payment, sub)
		}
	}

	// The subscription's events came first: the late completion leaves them.
	co := storetest.Company(t, st, "Late", "lu@late.example")
	cid := fmt.Sprint(co.ID)
	meta := starterMeta(co.ID)
	handle(t, svc, "evt_sub"+cid, billing.EventSubscriptionUpdated, created, map[string]any{"id": "sub_" + cid, "object": "subscription",
		"customer": "cus_" + cid, "status": "past_due", "metadata": meta})
	handle(t, svc, "evt_done"+cid, billing.EventCheckoutCompleted, created+1, map[string]any{"id": "cs_" + cid, "object": "checkout.session",
		"customer": "cus_" + cid, "subscription": "sub_" + cid, "status": "complete", "payment_status": "paid", "metadata": meta})
	if sub := subscription(t, st, co.ID); sub.Status != billing.StatusPastDue {
		t.Errorf("a completion after the subscription's events: %+v", sub)
	}
}

// A second live subscription of a company (two checkouts both paid) does
// not take the company's place: the one it holds stays, whatever arrives
// of the other, and each event of the other's that tells it is live is
// logged as an error naming both, for the operator to cancel one (it was a
// warning, as for news of a replaced subscription). Once the held one ends, the
// other's next event makes it the company's.
func TestSecondSubscriptionIsLoggedNotApplied(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	var logs syncbuf.Buffer
	svc := stripeServiceAt(t, st, "http://127.0.0.1:1", slog.New(slog.NewTextHandler(&logs, nil)), time.Now)
	meta := starterMeta(co.ID)
	sub := func(id, status, price string) map[string]any {
		return map[string]any{"id": id, "object": "subscription", "customer": "cus_A", "status": status, "metadata": meta,
			"items": map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_" + id, "object": "subscription_item",
				"price": map[string]any{"id": price, "object": "price"}}}}}
	}
	t0 := time.Now().Unix()
	handle(t, svc, "evt_1", billing.EventCheckoutCompleted, t0, map[string]any{"id": "cs_A", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_A", "status": "complete", "payment_status": "paid", "metadata": meta})
	handle(t, svc, "evt_2", billing.EventSubscriptionCreated, t0, sub("sub_A", "active", "price_starter"))
	// The second: its completion and its events, later.
	handle(t, svc, "evt_3", billing.EventCheckoutCompleted, t0+1, map[string]any{"id": "cs_B", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_B", "status": "complete", "payment_status": "paid", "metadata": meta})
	handle(t, svc, "evt_4", billing.EventSubscriptionCreated, t0+1, sub("sub_B", "active", "price_pro"))
	if got := subscription(t, st, co.ID); got.ProviderSubID != "sub_A" || got.PlanID != billing.PlanStarter || got.Status != billing.StatusActive {
		t.Fatalf("after a second subscription's events: %+v", got)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "event=evt_4 ") && strings.Contains(l, "level=ERROR") {
			line = l
		}
	}
	if !strings.Contains(line, "kept=sub_A") || !strings.Contains(line, "second=sub_B") {
		t.Errorf("no error logged of the second subscription's event naming both; the log:\n%s", logs.String())
	}
	// The held one ends; the other's next event makes it the company's.
	handle(t, svc, "evt_5", billing.EventSubscriptionDeleted, t0+2, sub("sub_A", "canceled", "price_starter"))
	handle(t, svc, "evt_6", billing.EventSubscriptionUpdated, t0+3, sub("sub_B", "active", "price_pro"))
	if got := subscription(t, st, co.ID); got.ProviderSubID != "sub_B" || got.PlanID != billing.PlanPro || got.Status != billing.StatusActive {
		t.Fatalf("after the held subscription ended: %+v", got)
	}
}

// A company whose Stripe subscription ended and that then took the free
// plan pays for nothing: it can check out again, and its new
// subscription's events are its own. The free plan kept the ended
// subscription's id under the status active, which read as a live
// subscription: every subscribe answered 409 (the free plan again too),
// and the new subscription's events were taken for a second one's.
func TestFreePlanAfterACanceledSubscription(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	px := stripemock.NewProxy(t)
	svc := mockedService(t, st, px, time.Now)
	if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
		sub.PlanID, sub.Status, sub.ProviderSubID, sub.CustomerID = billing.PlanPro, billing.StatusCanceled, "sub_old", "cus_A"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanFree})
	if err != nil || res.Status != billing.StatusActive {
		t.Fatalf("the free plan after a canceled subscription: %+v, %v", res, err)
	}
	if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanFree}); err != nil {
		t.Fatalf("the free plan again: %v", err)
	}
	res, err = svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanStarter})
	if err != nil || res.CheckoutURL == "" {
		t.Fatalf("a paid plan after the free plan: %+v, %v", res, err)
	}
	meta := starterMeta(co.ID)
	handle(t, svc, "evt_new", billing.EventSubscriptionCreated, time.Now().Unix(), map[string]any{"id": "sub_new", "object": "subscription",
		"customer": "cus_A", "status": "active", "metadata": meta})
	if got := subscription(t, st, co.ID); got.ProviderSubID != "sub_new" || got.PlanID != billing.PlanStarter || got.Status != billing.StatusActive {
		t.Fatalf("the new subscription's event: %+v", got)
	}

	// The operator's set-plan (admin set-plan) after a canceled subscription alike.
	op := storetest.Company(t, st, "Beta", "bo@beta.example")
	if _, err := st.UpdateSubscription(op.ID, func(sub *store.Subscription) error {
		sub.PlanID, sub.Status, sub.ProviderSubID = billing.PlanPro, billing.StatusCanceled, "sub_beta"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetPlan(op.ID, billing.PlanStarter); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: op.ID, PlanID: billing.PlanFree}); err != nil {
		t.Fatalf("the free plan after set-plan over a canceled subscription: %v", err)
	}
}

// A checkout completed whose first payment is still on its way (unpaid: a
// bank debit; the company reads none) is a subscription that becomes
// active when the payment arrives: a subscribe meanwhile answers 409, the
// free plan too. A second checkout was opened, and both debits arriving
// billed two subscriptions.
func TestSubscribeWhileTheFirstPaymentIsOnItsWay(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	svc := stripeService(t, st)
	meta := starterMeta(co.ID)
	handle(t, svc, "evt_done", billing.EventCheckoutCompleted, time.Now().Unix(), map[string]any{"id": "cs_A", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_A", "status": "complete", "payment_status": "unpaid", "metadata": meta})
	if got := subscription(t, st, co.ID); got.Status != billing.StatusNone || got.ProviderSubID != "sub_A" {
		t.Fatalf("after the completion: %+v", got)
	}
	for _, plan := range []string{billing.PlanPro, billing.PlanFree} {
		if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: plan}); !problem.Is(err, problem.Conflict) {
			t.Errorf("subscribe to %s while the first payment is on its way: %v, want 409 conflict", plan, err)
		}
	}
	// The debit fails: Stripe ends the subscription, and the company may
	// subscribe again.
	handle(t, svc, "evt_exp", billing.EventSubscriptionUpdated, time.Now().Unix()+1, map[string]any{"id": "sub_A", "object": "subscription",
		"customer": "cus_A", "status": "incomplete_expired", "metadata": meta})
	if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanFree}); err != nil {
		t.Errorf("the free plan once the subscription expired: %v", err)
	}
}

// Stripe keeps the answer to a request with an idempotency key for a day,
// a failure too, and refuses the key with other parameters. The customer's
// key was the company's alone: once a subscribe by one admin had failed at
// Stripe while making the customer, another admin's (another email), or
// one over the API (none), answered 502 for the day. The key is the
// company's and the email's.
func TestCheckoutCustomerKeyOfTheEmail(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	px := stripemock.NewProxy(t)
	svc := mockedService(t, st, px, time.Now)
	var mu sync.Mutex
	seen := map[string]bool{} // the idempotency keys Stripe has kept an answer of
	px.Answer(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method+" "+r.URL.Path != "POST /v1/customers" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if key := r.Header.Get("Idempotency-Key"); !seen[key] {
			// The first: Stripe fails, and keeps that answer.
			seen[key] = true
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"An unknown error occurred"}}`))
			return true
		}
		// Another email under a kept key.
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`))
		return true
	})
	if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, Email: "ana@acme.example", PlanID: billing.PlanStarter}); !problem.Is(err, problem.PaymentProviderError) {
		t.Fatalf("a subscribe while Stripe fails: %v, want 502", err)
	}
	px.Answer(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		kept := seen[r.Header.Get("Idempotency-Key")]
		mu.Unlock()
		if r.Method+" "+r.URL.Path == "POST /v1/customers" && kept {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`))
			return true
		}
		return false
	})
	for _, email := range []string{"bo@acme.example", ""} {
		res, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, Email: email, PlanID: billing.PlanStarter})
		if err != nil || res.CheckoutURL == "" {
			t.Fatalf("a subscribe by %q after another's failed: %+v, %v", email, res, err)
		}
		if email == "" {
			break
		}
		// The next one makes a customer again.
		if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
			sub.CustomerID, sub.Checkout = "", nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A checkout's completion that Stripe delivers late (its first tries
// failed: the server was down), after its subscription was canceled and the
// company took the free plan, does not bind that ended subscription again:
// the free plan had forgotten its id, and the completion made the company
// an active payer of the plan it no longer paid for, with no event of that
// subscription ever to come and set it right.
func TestLateCompletionOfAnEndedSubscription(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	svc := stripeService(t, st)
	meta := starterMeta(co.ID)
	t0 := time.Now().Unix() - 3600
	sub := func(status string) map[string]any {
		return map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": status, "metadata": meta}
	}
	handle(t, svc, "evt_created", billing.EventSubscriptionCreated, t0, sub("active"))
	handle(t, svc, "evt_deleted", billing.EventSubscriptionDeleted, t0+60, sub("canceled"))
	if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: billing.PlanFree}); err != nil {
		t.Fatalf("the free plan after the canceled subscription: %v", err)
	}
	handle(t, svc, "evt_done", billing.EventCheckoutCompleted, t0+1, map[string]any{"id": "cs_A", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_A", "status": "complete", "payment_status": "paid", "metadata": meta})
	view, err := svc.Subscription(context.Background(), co.ID)
	if err != nil {
		t.Fatal(err)
	}
	if view.PlanID != billing.PlanFree || view.Status != billing.StatusActive {
		t.Errorf("after the late completion of the ended subscription: %+v, want free, active", view)
	}
	if got := subscription(t, st, co.ID); got.ProviderSubID != "" {
		t.Errorf("the ended subscription bound again: %+v", got)
	}

	// A completion made after the end (a new checkout) binds as before.
	handle(t, svc, "evt_new", billing.EventCheckoutCompleted, t0+120, map[string]any{"id": "cs_B", "object": "checkout.session",
		"customer": "cus_A", "subscription": "sub_B", "status": "complete", "payment_status": "paid", "metadata": meta})
	if got := subscription(t, st, co.ID); got.ProviderSubID != "sub_B" || got.PlanID != billing.PlanStarter || got.Status != billing.StatusActive {
		t.Errorf("a new checkout's completion: %+v", got)
	}
}

// A deleted subscription stays ended: an update of it created in the same
// second as its deletion (Stripe's events carry whole seconds, and those of
// one second apply in the order they arrive) but arriving after it does not
// make it active again, nor does a later one. The company's next
// subscription is its own.
func TestDeletedSubscriptionIsNotRevived(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	svc := stripeService(t, st)
	meta := starterMeta(co.ID)
	sub := func(id, status string) map[string]any {
		return map[string]any{"id": id, "object": "subscription", "customer": "cus_A", "status": status, "metadata": meta}
	}
	t0 := time.Now().Unix()
	handle(t, svc, "evt_1", billing.EventSubscriptionCreated, t0, sub("sub_A", "active"))
	handle(t, svc, "evt_2", billing.EventSubscriptionDeleted, t0+5, sub("sub_A", "canceled"))
	handle(t, svc, "evt_3", billing.EventSubscriptionUpdated, t0+5, sub("sub_A", "active"))
	if got := subscription(t, st, co.ID); got.Status != billing.StatusCanceled {
		t.Fatalf("a same-second update after the deletion: %+v, want canceled", got)
	}
	handle(t, svc, "evt_4", billing.EventSubscriptionUpdated, t0+6, sub("sub_A", "past_due"))
	if got := subscription(t, st, co.ID); got.Status != billing.StatusCanceled {
		t.Fatalf("a later update of the deleted subscription: %+v, want canceled", got)
	}
	handle(t, svc, "evt_5", billing.EventSubscriptionCreated, t0+7, sub("sub_B", "active"))
	if got := subscription(t, st, co.ID); got.Status != billing.StatusActive || got.ProviderSubID != "sub_B" {
		t.Fatalf("the next subscription: %+v, want sub_B active", got)
	}
}

// A company is given a plan's trial once: after its trialing subscription
// ended (canceled in the trial) and the free plan, its next checkout at
// Stripe has no trial, asked for or not.
func TestTrialOncePerCompany(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	px := stripemock.NewProxy(t)
	var mu sync.Mutex
	var trials []bool // whether each checkout session asked for a trial
	px.Answer(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method+" "+r.URL.Path == createSession {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				t.Error(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			mu.Lock()
			trials = append(trials, form.Get("subscription_data[trial_period_days]") != "")
			mu.Unlock()
		}
		return false
	})
	svc := mockedService(t, st, px, time.Now)
	subscribe := func(plan string) {
		t.Helper()
		if _, err := svc.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: co.ID, PlanID: plan, Email: "ana@acme.example"}); err != nil {
			t.Fatalf("subscribe %s: %v", plan, err)
		}
	}
	subscribe(billing.PlanStarter)
	customer := subscription(t, st, co.ID).CustomerID
	meta := starterMeta(co.ID)
	sub := func(status string) map[string]any {
		return map[string]any{"id": "sub_A", "object": "subscription", "customer": customer, "status": status, "metadata": meta}
	}
	t0 := time.Now().Unix()
	handle(t, svc, "evt_1", billing.EventSubscriptionCreated, t0, sub("trialing"))
	handle(t, svc, "evt_2", billing.EventSubscriptionDeleted, t0+1, sub("canceled"))
	subscribe(billing.PlanFree)
	subscribe(billing.PlanStarter)
	mu.Lock()
	defer mu.Unlock()
	if len(trials) != 2 || !trials[0] || trials[1] {
		t.Fatalf("checkouts asked for a trial: %v; want [true false] (the first checkout only)", trials)
	}
}

// checkout.session.expired forgets the company's open checkout when it is
// that one (expired in the Stripe dashboard, or at its expiry), so that
// the company reads none that can still be paid (simrelay admin
// delete-company refuses one that can); another session's leaves it.
func TestCheckoutExpiredForgetsTheOpenCheckout(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	svc := stripeService(t, st)
	meta := starterMeta(co.ID)
	open := store.Checkout{SessionID: "cs_A", URL: "https://checkout.stripe.com/c/pay/cs_A", ExpiresAt: time.Now().Add(23 * time.Hour)}
	if _, err := st.UpdateSubscription(co.ID, func(sub *store.Subscription) error {
		sub.Checkout = &open
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	handle(t, svc, "evt_other", billing.EventCheckoutExpired, time.Now().Unix(), map[string]any{"id": "cs_B", "object": "checkout.session",
		"status": "expired", "metadata": meta})
	if got := subscription(t, st, co.ID).Checkout; got == nil || got.SessionID != "cs_A" {
		t.Fatalf("after another session expired: %+v, want cs_A still open", got)
	}
	handle(t, svc, "evt_exp", billing.EventCheckoutExpired, time.Now().Unix(), map[string]any{"id": "cs_A", "object": "checkout.session",
		"customer": "cus_A", "status": "expired", "metadata": meta})
	sub := subscription(t, st, co.ID)
	if store.CheckoutPayable(sub.Checkout, time.Now()) {
		t.Fatalf("after its session expired: %+v, want no payable checkout", sub.Checkout)
	}
	if sub.CustomerID != "" {
		t.Errorf("an expired session bound its customer %q", sub.CustomerID)
	}
}

// A subscription moved (in the Billing Portal) to a Stripe price that no
// plan of the plans file has keeps the plan its metadata names, and its
// limits: the operator is told so by one warning per such price, naming
// it, however many events carry it (a warning per event would bury the
// log under each renewal's).
func TestPriceOfNoPlanIsWarnedOnce(t *testing.T) {
	t.Parallel()
	st, co := acme(t)
	var logs syncbuf.Buffer
	svc := stripeServiceAt(t, st, "http://127.0.0.1:1", slog.New(slog.NewTextHandler(&logs, nil)), time.Now)
	meta := starterMeta(co.ID)
	sub := func(price string) map[string]any {
		return map[string]any{"id": "sub_A", "object": "subscription", "customer": "cus_A", "status": "active", "metadata": meta,
			"items": map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_A", "object": "subscription_item",
				"price": map[string]any{"id": price, "object": "price"}}}}}
	}
	t0 := time.Now().Unix()
	handle(t, svc, "evt_1", billing.EventSubscriptionCreated, t0, sub("price_starter"))
	handle(t, svc, "evt_2", billing.EventSubscriptionUpdated, t0+1, sub("price_gold"))
	handle(t, svc, "evt_3", billing.EventSubscriptionUpdated, t0+2, sub("price_gold"))
	handle(t, svc, "evt_4", billing.EventSubscriptionUpdated, t0+3, sub("price_platinum"))
	if got := subscription(t, st, co.ID); got.PlanID != billing.PlanStarter || got.Status != billing.StatusActive {
		t.Fatalf("after the moves to prices of no plan: %+v, want the metadata's plan, starter", got)
	}
	warned := map[string]int{}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "plans file") {
			for _, p := range []string{"price_gold", "price_platinum", "price_starter"} {
				if strings.Contains(l, "price="+p) {
					warned[p]++
				}
			}
		}
	}
	if warned["price_gold"] != 1 || warned["price_platinum"] != 1 || warned["price_starter"] != 0 {
		t.Errorf("warnings per price: %v, want one for each price of no plan; the log:\n%s", warned, logs.String())
	}
}
