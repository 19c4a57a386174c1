package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// BillingStore is what the billing suite calls.
type BillingStore interface {
	Base
	SetPlans(p store.Plans)
	Subscription(companyID uint64) (sub store.Subscription, found bool, err error)
	UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error)
	ApplyProviderEvent(eventID string, companyID uint64, customer string, created int64, ordered bool, now time.Time, fn func(sub *store.Subscription, stale bool) bool) (applied bool, err error)
	CompanyByCustomer(customerID string) (companyID uint64, found bool, err error)
	PruneBillingEvents(cutoff time.Time) (int, error)
}

// Billing runs the suite of subscriptions, the payment provider's events
// and the plans that price them into limits.
func Billing(t *testing.T, open Opener[BillingStore]) {
	t.Run("Subscription", func(t *testing.T) { t.Parallel(); subscriptionRoundTrip(t, open(t)) })
	t.Run("Customers", func(t *testing.T) { t.Parallel(); subscriptionCustomers(t, open(t)) })
	t.Run("EventsOnce", func(t *testing.T) { t.Parallel(); providerEventsOnce(t, open(t)) })
	t.Run("ForeignCustomer", func(t *testing.T) { t.Parallel(); providerForeignCustomer(t, open(t)) })
	t.Run("OrderedEvents", func(t *testing.T) { t.Parallel(); providerOrderedEvents(t, open(t)) })
	t.Run("PruneEvents", func(t *testing.T) { t.Parallel(); providerEventsPruned(t, open(t)) })
	t.Run("PlanLimits", func(t *testing.T) { t.Parallel(); planLimits(t, open(t)) })
}

// absentCompany is an id no company of a fresh store has.
const absentCompany = 1 << 40

// subscriptionRoundTrip: a company has no stored subscription until its
// first change (found false, the company's id set); a change stores what
// fn made of it, whole; fn's refusal stores nothing and is the error; a
// company that does not exist is ErrNotFound.
func subscriptionRoundTrip(t *testing.T, s BillingStore) {
	c, _ := Company(t, s)
	sub, found, err := s.Subscription(c.ID)
	if err != nil || found || sub.CompanyID != c.ID || sub.PlanID != "" {
		t.Fatalf("before any change: %+v found %v (%v), want none for company %d", sub, found, err, c.ID)
	}
	refused := errors.New("refused")
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		sub.PlanID = "pro"
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("fn's refusal: %v, want it returned", err)
	}
	if _, found, err := s.Subscription(c.ID); err != nil || found {
		t.Fatalf("after a refused change: found %v (%v), want nothing stored", found, err)
	}
	trial := T0.AddDate(0, 0, 14)
	want := store.Subscription{
		CompanyID: c.ID, PlanID: "starter", Status: "trialing", TrialEndsAt: &trial,
		PeriodStart: T0, PeriodEnd: T0.AddDate(0, 1, 0), ProviderSubID: "sub_1", EventCreated: 17, UpdatedAt: T0,
	}
	got, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		if sub.CompanyID != c.ID || sub.PlanID != "" {
			t.Errorf("fn got %+v, want a zero subscription of company %d", *sub, c.ID)
		}
		*sub = want
		sub.CompanyID = absentCompany // the store keeps it the company's
		return nil
	})
	if err != nil || !sameSubscription(got, want) {
		t.Fatalf("update: %+v (%v), want %+v", got, err, want)
	}
	if got, found, err := s.Subscription(c.ID); err != nil || !found || !sameSubscription(got, want) {
		t.Fatalf("read back: %+v found %v (%v), want %+v", got, found, err, want)
	}
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		if !sameSubscription(*sub, want) {
			t.Errorf("the second change's fn got %+v, want the stored %+v", *sub, want)
		}
		sub.Status, sub.TrialEndsAt = "active", nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Subscription(c.ID); got.Status != "active" || got.TrialEndsAt != nil || got.PlanID != "starter" {
		t.Fatalf("after the second change: %+v, want active starter without a trial", got)
	}
	if _, err := s.UpdateSubscription(absentCompany, func(*store.Subscription) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a company that does not exist: %v, want ErrNotFound", err)
	}
	if _, found, err := s.Subscription(absentCompany); err != nil || found {
		t.Fatalf("the absent company's subscription: found %v (%v), want none", found, err)
	}
}

// sameSubscription compares subscriptions by value, times by instant.
func sameSubscription(a, b store.Subscription) bool {
	sameTrial := (a.TrialEndsAt == nil) == (b.TrialEndsAt == nil) && (a.TrialEndsAt == nil || a.TrialEndsAt.Equal(*b.TrialEndsAt))
	a.TrialEndsAt, b.TrialEndsAt = nil, nil
	sameTimes := a.PeriodStart.Equal(b.PeriodStart) && a.PeriodEnd.Equal(b.PeriodEnd) && a.UpdatedAt.Equal(b.UpdatedAt)
	a.PeriodStart, a.PeriodEnd, a.UpdatedAt = b.PeriodStart, b.PeriodEnd, b.UpdatedAt
	sameEnded := slices.Equal(a.EndedSubIDs, b.EndedSubIDs)
	a.EndedSubIDs, b.EndedSubIDs = nil, nil
	sameCheckout := a.Checkout == b.Checkout
	a.Checkout, b.Checkout = nil, nil
	return sameTrial && sameTimes && sameEnded && sameCheckout && reflect.DeepEqual(a, b)
}

// subscriptionCustomers: the provider's customer a change stores finds
// the company again; an unknown customer finds none, without an error.
func subscriptionCustomers(t *testing.T, s BillingStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	if id, found, err := s.CompanyByCustomer("cus_none"); err != nil || found || id != 0 {
		t.Fatalf("an unknown customer: %d found %v (%v), want none", id, found, err)
	}
	for _, c := range []store.Company{a, b} {
		if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
			sub.CustomerID = fmt.Sprintf("cus_%d", c.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []store.Company{a, b} {
		if id, found, err := s.CompanyByCustomer(fmt.Sprintf("cus_%d", c.ID)); err != nil || !found || id != c.ID {
			t.Fatalf("customer of company %d: %d found %v (%v)", c.ID, id, found, err)
		}
	}
}

// providerEventsOnce: an event id is applied once, however often and
// however concurrently the provider delivers it; an event for a company
// that does not exist is ErrNotFound and records nothing of its id.
func providerEventsOnce(t *testing.T, s BillingStore) {
	c, _ := Company(t, s)
	var calls atomic.Int32
	fn := func(sub *store.Subscription, stale bool) bool {
		calls.Add(1)
		sub.Status = "active"
		return true
	}
	const deliveries = 8
	var wg sync.WaitGroup
	var applied atomic.Int32
	errs := make(chan error, deliveries)
	for range deliveries {
		wg.Go(func() {
			ok, err := s.ApplyProviderEvent("evt_1", c.ID, "", 100, true, T0, fn)
			if err != nil {
				errs <- err
			}
			if ok {
				applied.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a delivery of the event: %v", err)
	}
	if applied.Load() != 1 || calls.Load() != 1 {
		t.Fatalf("%d deliveries: applied %d times, fn called %d times; want once each", deliveries, applied.Load(), calls.Load())
	}
	sub, found, err := s.Subscription(c.ID)
	if err != nil || !found || sub.Status != "active" || sub.EventCreated != 100 || !sub.UpdatedAt.Equal(T0) {
		t.Fatalf("after the event: %+v found %v (%v), want active, event 100, updated at T0", sub, found, err)
	}
	if ok, err := s.ApplyProviderEvent("evt_2", absentCompany, "", 100, true, T0, fn); !errors.Is(err, store.ErrNotFound) || ok {
		t.Fatalf("an event for a company that does not exist: applied %v (%v), want ErrNotFound", ok, err)
	}
	if ok, err := s.ApplyProviderEvent("evt_2", c.ID, "", 101, true, T0, fn); err != nil || !ok {
		t.Fatalf("the same event id for the company: applied %v (%v), want applied (the refusal recorded nothing)", ok, err)
	}
}

// providerForeignCustomer: a customer binds to the first company an event
// binds it to; an event that names it for another company, or names
// another customer for a company bound already, is ErrForeignCustomer and
// changes nothing; its id is recorded, so a retry is acknowledged at once.
func providerForeignCustomer(t *testing.T, s BillingStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	set := func(status string) func(*store.Subscription, bool) bool {
		return func(sub *store.Subscription, _ bool) bool { sub.Status = status; return true }
	}
	if ok, err := s.ApplyProviderEvent("evt_a", a.ID, "cus_a", 100, true, T0, set("active")); err != nil || !ok {
		t.Fatalf("the first event of company a: applied %v (%v)", ok, err)
	}
	if id, found, err := s.CompanyByCustomer("cus_a"); err != nil || !found || id != a.ID {
		t.Fatalf("the customer bound by the event: company %d found %v (%v), want %d", id, found, err, a.ID)
	}
	if sub, _, _ := s.Subscription(a.ID); sub.CustomerID != "cus_a" {
		t.Fatalf("company a's subscription: %+v, want customer cus_a", sub)
	}
	called := false
	spy := func(sub *store.Subscription, _ bool) bool { called = true; sub.Status = "canceled"; return true }
	if ok, err := s.ApplyProviderEvent("evt_b", b.ID, "cus_a", 200, true, T0, spy); !errors.Is(err, store.ErrForeignCustomer) || ok {
		t.Fatalf("company a's customer named for company b: applied %v (%v), want ErrForeignCustomer", ok, err)
	}
	if _, found, _ := s.Subscription(b.ID); found || called {
		t.Fatalf("company b after the foreign event: found %v, fn called %v; want nothing", found, called)
	}
	if ok, err := s.ApplyProviderEvent("evt_b", b.ID, "cus_a", 200, true, T0, spy); err != nil || ok || called {
		t.Fatalf("a retry of the foreign event: applied %v (%v), fn called %v; want acknowledged, not applied", ok, err, called)
	}
	if ok, err := s.ApplyProviderEvent("evt_c", a.ID, "cus_other", 300, true, T0, spy); !errors.Is(err, store.ErrForeignCustomer) || ok || called {
		t.Fatalf("another customer named for company a: applied %v (%v), fn called %v; want ErrForeignCustomer", ok, err, called)
	}
	if sub, _, _ := s.Subscription(a.ID); sub.Status != "active" || sub.CustomerID != "cus_a" || sub.EventCreated != 100 {
		t.Fatalf("company a after the foreign events: %+v, want unchanged", sub)
	}
	if _, found, err := s.CompanyByCustomer("cus_other"); err != nil || found {
		t.Fatalf("the refused customer: found %v (%v), want it bound to nobody", found, err)
	}
	if ok, err := s.ApplyProviderEvent("evt_d", b.ID, "cus_b", 400, true, T0, set("active")); err != nil || !ok {
		t.Fatalf("company b's own customer: applied %v (%v)", ok, err)
	}
}

// providerOrderedEvents: an ordered event older than the newest applied
// is told stale; only an ordered event whose fn changed the state becomes
// the newest; events of the same second are not stale; unordered events
// are never stale and never move the newest.
func providerOrderedEvents(t *testing.T, s BillingStore) {
	c, _ := Company(t, s)
	n := 0
	apply := func(created int64, ordered, change bool, wantStale bool) {
		t.Helper()
		n++
		at := T0.Add(time.Duration(n) * time.Minute)
		var gotStale, called bool
		ok, err := s.ApplyProviderEvent(fmt.Sprintf("evt_%d", n), c.ID, "cus_1", created, ordered, at, func(sub *store.Subscription, stale bool) bool {
			called, gotStale = true, stale
			if stale || !change {
				return false
			}
			sub.Status = fmt.Sprintf("status-%d", n)
			return true
		})
		if err != nil || !ok || !called || gotStale != wantStale {
			t.Fatalf("event %d (created %d, ordered %v): applied %v (%v), called %v, stale %v; want applied, stale %v", n, created, ordered, ok, err, called, gotStale, wantStale)
		}
		if sub, _, _ := s.Subscription(c.ID); !sub.UpdatedAt.Equal(at) {
			t.Fatalf("event %d: updated at %v, want %v", n, sub.UpdatedAt, at)
		}
	}
	newest := func(want int64, status string) {
		t.Helper()
		sub, _, err := s.Subscription(c.ID)
		if err != nil || sub.EventCreated != want || sub.Status != status {
			t.Fatalf("after event %d: newest %d, status %q (%v); want %d and %q", n, sub.EventCreated, sub.Status, err, want, status)
		}
	}
	apply(200, true, true, false)
	newest(200, "status-1")
	apply(100, true, true, true) // older: stale, leaves the state
	newest(200, "status-1")
	apply(200, true, true, false) // the same second: applies
	newest(200, "status-3")
	apply(50, false, true, false) // unordered: applies, never the newest
	newest(200, "status-4")
	apply(300, true, false, false) // changed nothing: not the newest
	newest(200, "status-4")
	apply(250, true, true, false)
	newest(250, "status-6")
}

// limitsByPlan prices a subscription: plan "solo" allows one device and
// two messages a month; no subscription, or another plan, nothing limited.
type limitsByPlan struct {
	mu    sync.Mutex
	found []bool // what each call was told
}

func (p *limitsByPlan) Limits(sub store.Subscription, found bool, now time.Time) store.PlanLimits {
	p.mu.Lock()
	p.found = append(p.found, found)
	p.mu.Unlock()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	l := store.PlanLimits{Messages: -1, Devices: -1, PeriodStart: from, PeriodEnd: from.AddDate(0, 1, 0)}
	if found && sub.PlanID == "solo" {
		l.Messages, l.Devices = 2, 1
	}
	return l
}

func (p *limitsByPlan) sawFound() (withSub, without bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.found {
		withSub, without = withSub || f, without || !f
	}
	return withSub, without
}

// planLimits: the plans SetPlans installs price the company's stored
// subscription (found false before its first change) into the limits a
// new device registration is held to.
func planLimits(t *testing.T, s BillingStore) {
	plans := &limitsByPlan{}
	s.SetPlans(plans)
	c, _ := Company(t, s)
	Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	if withSub, without := plans.sawFound(); withSub || !without {
		t.Fatalf("without a subscription the plans were told found %v / not found %v; want only not found", withSub, without)
	}
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error { sub.PlanID = "solo"; return nil }); err != nil {
		t.Fatal(err)
	}
	code := []byte(fmt.Sprintf("pairing-%d", unique()))
	if err := s.PutPairing(code, store.Pairing{CompanyID: c.ID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := s.RegisterDevice(code, T0, fmt.Sprintf("fp-%d", unique()), func(store.Pairing, *store.Device) (store.Device, error) {
		return store.Device{Status: store.DeviceActive, TokenHash: []byte(fmt.Sprintf("token-%d", unique()))}, nil
	})
	var pl *store.PlanLimitError
	if !errors.As(err, &pl) || !errors.Is(err, store.ErrPlanLimit) || pl.What != store.LimitDevices || pl.Limit != 1 {
		t.Fatalf("a third device on plan solo: %v, want the plan's device limit of 1", err)
	}
	if withSub, _ := plans.sawFound(); !withSub {
		t.Fatal("the plans were never told of the stored subscription")
	}
	// Another company is not on the plan.
	other, _ := Company(t, s)
	Device(t, s, other.ID, fmt.Sprintf("fp-%d", unique()))
	Device(t, s, other.ID, fmt.Sprintf("fp-%d", unique()))
}

// providerEventsPruned: pruning forgets the ids of events applied before
// the cutoff and keeps the later ones, so a retry of a recent event still
// changes nothing; a forgotten id applies again (the server keeps ids
// longer than the provider resends an event).
func providerEventsPruned(t *testing.T, s BillingStore) {
	c, _ := Company(t, s)
	calls := 0
	fn := func(sub *store.Subscription, _ bool) bool { calls++; sub.Status = "active"; return true }
	old, recent := T0, T0.Add(48*time.Hour)
	if ok, err := s.ApplyProviderEvent("evt_old", c.ID, "", 100, false, old, fn); err != nil || !ok {
		t.Fatalf("the old event: applied %v (%v)", ok, err)
	}
	if ok, err := s.ApplyProviderEvent("evt_recent", c.ID, "", 101, false, recent, fn); err != nil || !ok {
		t.Fatalf("the recent event: applied %v (%v)", ok, err)
	}
	n, err := s.PruneBillingEvents(T0.Add(24 * time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d event ids (%v), want 1", n, err)
	}
	if n, err := s.PruneBillingEvents(T0.Add(24 * time.Hour)); err != nil || n != 0 {
		t.Fatalf("a second prune dropped %d (%v), want 0", n, err)
	}
	calls = 0
	if ok, err := s.ApplyProviderEvent("evt_recent", c.ID, "", 101, false, recent.Add(time.Hour), fn); err != nil || ok || calls != 0 {
		t.Fatalf("a retry of the kept event: applied %v, fn called %d times (%v), want neither", ok, calls, err)
	}
	if ok, err := s.ApplyProviderEvent("evt_old", c.ID, "", 100, false, recent.Add(time.Hour), fn); err != nil || !ok || calls != 1 {
		t.Fatalf("the pruned event's id: applied %v, fn called %d times (%v), want applied once", ok, calls, err)
	}
}
