package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// WebhooksStore is what the webhooks suite calls. UpdateDeviceWith is the
// write transaction the suite's events join, as a device event's does.
type WebhooksStore interface {
	Base
	UpdateDeviceWith(companyID, deviceID uint64, fn func(d *store.Device) ([]store.DeviceEvent, error)) (store.Device, error)
	SetDeviceEvents(h store.DeviceEvents)
	WebhookSet(companyID uint64) (store.WebhookSet, error)
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
	WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error)
	DueWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error)
	ClaimWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error)
	WebhookJob(id uint64) (store.WebhookJob, error)
	RecordWebhookAttempt(id uint64, keep int, decide func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt) (store.WebhookAttempt, error)
	RecordWebhookAttemptLater(id uint64, keep int, decide func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt) store.AttemptRecord
	WebhookAttempts(companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error)
	PruneWebhookAttempts(cutoff time.Time, keep int) (int, error)
}

// Webhooks runs the suite of webhook sets, the outbox and the deliveries log.
func Webhooks(t *testing.T, open Opener[WebhooksStore]) {
	t.Run("Set", func(t *testing.T) { t.Parallel(); webhookSet(t, open(t)) })
	t.Run("JoinsTheTransaction", func(t *testing.T) { t.Parallel(); webhookJoinsTx(t, open(t)) })
	t.Run("EventSharedByDeliveries", func(t *testing.T) { t.Parallel(); webhookEventShared(t, open(t)) })
	t.Run("OutboxBound", func(t *testing.T) { t.Parallel(); webhookOutboxBound(t, open(t)) })
	t.Run("OutboxBoundConcurrent", func(t *testing.T) { t.Parallel(); webhookOutboxBoundConcurrent(t, open(t)) })
	t.Run("Due", func(t *testing.T) { t.Parallel(); webhookDue(t, open(t)) })
	t.Run("DuePassesFullCompanies", func(t *testing.T) { t.Parallel(); webhookDuePassesFull(t, open(t), 2*time.Second) })
	// The other company's due spread across the full one's 300: a pass
	// that reads in due order at first and by entry later (the embedded
	// store, past what it walks over) takes the same, in the same order.
	t.Run("DuePassesFullCompaniesSpread", func(t *testing.T) { t.Parallel(); webhookDuePassesFull(t, open(t), 100*time.Second) })
	t.Run("Claim", func(t *testing.T) { t.Parallel(); webhookClaim(t, open(t)) })
	t.Run("Attempts", func(t *testing.T) { t.Parallel(); webhookAttempts(t, open(t)) })
	t.Run("AttemptsConcurrent", func(t *testing.T) { t.Parallel(); webhookAttemptsConcurrent(t, open(t)) })
	t.Run("LogCappedOnWrite", func(t *testing.T) { t.Parallel(); webhookLogCapped(t, open(t)) })
	t.Run("PruneAttempts", func(t *testing.T) { t.Parallel(); webhookPrune(t, open(t)) })
}

// webhookTenant is a company with one device and a webhook set.
type webhookTenant struct {
	company store.Company
	device  store.Device
	set     store.WebhookSet
}

// webhookSetter is what webhookCompany needs of a store.
type webhookSetter interface {
	Base
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
}

// webhookCompany makes a company with a device and a set of n active
// entries signed with a secret.
func webhookCompany(t *testing.T, s webhookSetter, n int) webhookTenant {
	t.Helper()
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	set, err := s.UpdateWebhookSet(c.ID, T0, func(w *store.WebhookSet) error {
		w.Secret = fmt.Sprintf("whsec_%d", c.ID)
		for i := range n {
			w.Entries = append(w.Entries, store.WebhookEntry{URL: fmt.Sprintf("https://hooks.example.com/%d", i), Active: true})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return webhookTenant{company: c, device: d, set: set}
}

// eventBody is the body of the suite's events.
const eventBody = `{"type":"sms.received"}`

// perEntry builds an event with the body and one delivery, due at at, per
// entry of the set.
func perEntry(at time.Time, body string) func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
	return func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", unique()), Body: []byte(body)}
		var out []store.WebhookDelivery
		for _, e := range set.Entries {
			out = append(out, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d", unique()), EventType: "sms.received",
				WebhookID: e.ID, CreatedAt: at, NextAttemptAt: at})
		}
		return ev, out, nil
	}
}

// webhookRouter is the device events builder the suite registers with a
// store: each write of the suite raises one event whose type names its
// call, and the router hands that call's build the set and its result back,
// so writes at once each get their own.
type webhookRouter struct {
	mu    sync.Mutex
	set   bool
	lim   store.OutboxLimits
	calls map[string]*webhookCall
}

type webhookCall struct {
	build     func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error)
	res       store.OutboxAdd
	committed bool
}

var webhookRouters sync.Map // WebhooksStore -> *webhookRouter

// webhookRoute registers the store's router with the limits lim (again
// when they changed: only between writes, never while one is under way).
func webhookRoute(s WebhooksStore, lim store.OutboxLimits) *webhookRouter {
	v, _ := webhookRouters.LoadOrStore(s, &webhookRouter{calls: map[string]*webhookCall{}})
	r := v.(*webhookRouter)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.set || r.lim != lim {
		r.set, r.lim = true, lim
		s.SetDeviceEvents(store.DeviceEvents{
			Limits: lim,
			Build: func(set store.WebhookSet, _ store.Device, ev store.DeviceEvent) (store.WebhookEvent, []store.WebhookDelivery, error) {
				r.mu.Lock()
				c := r.calls[ev.Type]
				r.mu.Unlock()
				return c.build(set)
			},
			Committed: func(_ store.Device, ev store.DeviceEvent, res store.OutboxAdd) {
				r.mu.Lock()
				defer r.mu.Unlock()
				c := r.calls[ev.Type]
				c.res, c.committed = res, true
			},
		})
	}
	return r
}

// routeEvent writes an event built by build in a change of the tenant's
// device that fails with fail (nil: commits), as a device event is
// written, and says what the store reported after the commit.
func routeEvent(s WebhooksStore, w webhookTenant, at time.Time, lim store.OutboxLimits, build func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error), fail error) (res store.OutboxAdd, committed bool, err error) {
	r := webhookRoute(s, lim)
	key := fmt.Sprintf("call-%d", unique())
	c := &webhookCall{build: build}
	r.mu.Lock()
	r.calls[key] = c
	r.mu.Unlock()
	_, err = s.UpdateDeviceWith(w.company.ID, w.device.ID, func(*store.Device) ([]store.DeviceEvent, error) {
		return []store.DeviceEvent{{Type: key, At: at}}, fail
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.calls, key)
	return c.res, c.committed, err
}

// addEvent writes an event in a change of the tenant's device, as a device
// event is written.
func addEvent(s WebhooksStore, w webhookTenant, at time.Time, lim store.OutboxLimits, build func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error)) (store.OutboxAdd, error) {
	res, _, err := routeEvent(s, w, at, lim, build, nil)
	return res, err
}

// mustAdd adds an event of one delivery per entry, due at at, without limits.
func mustAdd(t *testing.T, s WebhooksStore, w webhookTenant, at time.Time) {
	t.Helper()
	res, err := addEvent(s, w, at, store.OutboxLimits{}, perEntry(at, eventBody))
	if err != nil || res.Queued != len(w.set.Entries) {
		t.Fatalf("add an event: %+v (%v), want %d queued", res, err, len(w.set.Entries))
	}
}

// dueIDs is DueWebhookDeliveries by delivery id.
func dueIDs(t *testing.T, s WebhooksStore, now time.Time, limit int, skip func(id uint64) bool) ([]uint64, time.Time) {
	t.Helper()
	var by store.DueSkip
	if skip != nil {
		by = store.SkipIf(func(d store.WebhookDue) bool { return skip(d.ID) })
	}
	due, next, err := s.DueWebhookDeliveries(now, limit, by)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	return ids, next
}

// outcome is a decide that records a line of the state at at.
func outcome(state string, at time.Time) func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt {
	return func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt {
		a := store.WebhookAttempt{State: state, CreatedAt: at}
		if state == store.WebhookPending {
			a.NextAttemptAt = at.Add(time.Hour)
		}
		return a
	}
}

// webhookSet: new entries get ids no other entry of any company has and
// the time of the write; kept entries keep theirs; a refused change stores
// nothing; a company without webhooks has an empty set.
func webhookSet(t *testing.T, s WebhooksStore) {
	a := webhookCompany(t, s, 2)
	b := webhookCompany(t, s, 2)
	ids := map[uint64]bool{}
	for _, w := range []webhookTenant{a, b} {
		if w.set.CompanyID != w.company.ID {
			t.Errorf("set of company %d names company %d", w.company.ID, w.set.CompanyID)
		}
		for _, e := range w.set.Entries {
			if e.ID == 0 || ids[e.ID] || !e.CreatedAt.Equal(T0) {
				t.Fatalf("entry %+v: want an id no other entry has, created at %v", e, T0)
			}
			ids[e.ID] = true
		}
	}
	kept := a.set.Entries[1]
	later := T0.Add(time.Hour)
	set, err := s.UpdateWebhookSet(a.company.ID, later, func(w *store.WebhookSet) error {
		w.Entries = []store.WebhookEntry{kept, {URL: "https://new.example.com", Active: true}}
		return nil
	})
	if err != nil || len(set.Entries) != 2 {
		t.Fatalf("update: %+v (%v)", set, err)
	}
	if got := set.Entries[0]; got.ID != kept.ID || !got.CreatedAt.Equal(T0) {
		t.Errorf("kept entry: %+v, want id %d created at %v", got, kept.ID, T0)
	}
	if got := set.Entries[1]; got.ID == 0 || ids[got.ID] || !got.CreatedAt.Equal(later) {
		t.Errorf("new entry: %+v, want a new id created at %v", got, later)
	}
	boom := errors.New("refused")
	if _, err := s.UpdateWebhookSet(a.company.ID, later, func(w *store.WebhookSet) error { w.Entries, w.Secret = nil, ""; return boom }); !errors.Is(err, boom) {
		t.Fatalf("a refused change: %v, want the refusal", err)
	}
	got, err := s.WebhookSet(a.company.ID)
	if err != nil || len(got.Entries) != 2 || got.Entries[0].ID != kept.ID || got.Entries[1].ID != set.Entries[1].ID || got.Secret != a.set.Secret {
		t.Fatalf("after the refused change: %+v (%v), want the two entries and the secret unchanged", got, err)
	}
	if got, err := s.WebhookSet(b.company.ID); err != nil || len(got.Entries) != 2 || got.Secret != b.set.Secret || got.Entries[0].ID != b.set.Entries[0].ID {
		t.Fatalf("the other company's set: %+v (%v)", got, err)
	}
	// A set the write names another company is still the company's.
	if _, err := s.UpdateWebhookSet(b.company.ID, later, func(w *store.WebhookSet) error { w.CompanyID = a.company.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.WebhookSet(b.company.ID); got.CompanyID != b.company.ID || len(got.Entries) != 2 {
		t.Fatalf("after a write naming company %d: %+v", a.company.ID, got)
	}
	if got, _ := s.WebhookSet(a.company.ID); len(got.Entries) != 2 || got.Secret != a.set.Secret {
		t.Fatalf("company a's set after b's write: %+v", got)
	}
	none, _ := Company(t, s)
	if got, err := s.WebhookSet(none.ID); err != nil || got.CompanyID != none.ID || len(got.Entries) != 0 || got.Secret != "" {
		t.Fatalf("a company without webhooks: %+v (%v), want an empty set of its own", got, err)
	}
}

// webhookJoinsTx: the event is stored with the transaction it joins or not
// at all, and its hooks run only after the commit; a delivery reads back
// with the event's body behind its own id, its entry and the secret; a
// company without entries, or an event without deliveries, stores nothing;
// an event id is the event's while it is pending; a transaction of another
// kind is refused.
func webhookJoinsTx(t *testing.T, s WebhooksStore) {
	w := webhookCompany(t, s, 2)
	boom := errors.New("the device's write failed")
	res, committed, err := routeEvent(s, w, T0, store.OutboxLimits{}, perEntry(T0, eventBody), boom)
	if !errors.Is(err, boom) || committed || res != (store.OutboxAdd{}) {
		t.Fatalf("a failing transaction: %v, committed %v (%+v), want its error and no commit", err, committed, res)
	}
	if ids, next := dueIDs(t, s, T0.Add(time.Hour), 10, nil); len(ids) != 0 || !next.IsZero() {
		t.Fatalf("after a failed transaction: due %v, next %v; want nothing", ids, next)
	}
	if n, b, err := s.WebhookOutboxSize(w.company.ID); n != 0 || b != 0 || err != nil {
		t.Fatalf("outbox after a failed transaction: %d deliveries, %d bytes (%v)", n, b, err)
	}

	var ev store.WebhookEvent
	res, committed, err = routeEvent(s, w, T0, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		if set.CompanyID != w.company.ID || len(set.Entries) != 2 || set.Secret != w.set.Secret {
			t.Errorf("build got %+v, want the company's set", set)
		}
		var ds []store.WebhookDelivery
		var err error
		ev, ds, err = perEntry(T0, eventBody)(set)
		return ev, ds, err
	}, nil)
	if err != nil || !committed || res.Queued != 2 || res.Refused != 0 || res.Pending != 2 || res.PendingBytes != int64(len(eventBody)) {
		t.Fatalf("a committed transaction: %+v (%v), committed %v; want 2 queued, 2 pending of %d bytes, after the commit", res, err, committed, len(eventBody))
	}
	ids, next := dueIDs(t, s, T0, 10, nil)
	if len(ids) != 2 || !next.IsZero() {
		t.Fatalf("due: %v, next %v; want 2 deliveries and nothing later", ids, next)
	}
	entries := map[uint64]bool{}
	for _, id := range ids {
		job, err := s.WebhookJob(id)
		if err != nil {
			t.Fatal(err)
		}
		d := job.Delivery
		if d.ID != id || d.CompanyID != w.company.ID || d.EventID != ev.ID || d.EventType != "sms.received" || d.Attempts != 0 ||
			!d.CreatedAt.Equal(T0) || !d.NextAttemptAt.Equal(T0) || string(d.Body) != string(store.DeliveryBody(d.UUID, []byte(eventBody))) {
			t.Errorf("delivery %d: %+v (body %s)", id, d, d.Body)
		}
		if job.Entry == nil || job.Entry.ID != d.WebhookID || job.Secret != w.set.Secret {
			t.Errorf("job %d: entry %+v, secret %q; want the delivery's entry and the company's secret", id, job.Entry, job.Secret)
		}
		entries[d.WebhookID] = true
	}
	if len(entries) != 2 {
		t.Errorf("the deliveries go to %d entries, want one each to 2", len(entries))
	}
	if _, err := s.WebhookJob(ids[1] + 1000); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown delivery: %v, want ErrNotFound", err)
	}

	// The event's id is taken while its deliveries are pending.
	if _, err := addEvent(s, w, T0, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		_, ds, _ := perEntry(T0, eventBody)(set)
		return ev, ds, nil
	}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a pending event's id again: %v, want ErrConflict", err)
	}
	if _, err := addEvent(s, w, T0, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		_, ds, _ := perEntry(T0, eventBody)(set)
		return store.WebhookEvent{Body: []byte(eventBody)}, ds, nil
	}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an event without an id: %v, want ErrConflict", err)
	}
	// Nothing to deliver: nothing stored.
	if res, err := addEvent(s, w, T0, store.OutboxLimits{}, func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		return store.WebhookEvent{ID: "ev-none", Body: []byte(eventBody)}, nil, nil
	}); err != nil || res != (store.OutboxAdd{}) {
		t.Errorf("an event without deliveries: %+v (%v), want nothing done", res, err)
	}
	bare := webhookCompany(t, s, 0)
	if res, err := addEvent(s, bare, T0, store.OutboxLimits{}, func(store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		t.Error("build ran for a company without webhooks")
		return store.WebhookEvent{}, nil, nil
	}); err != nil || res != (store.OutboxAdd{}) {
		t.Errorf("a company without webhooks: %+v (%v), want nothing done", res, err)
	}
	if n, _, _ := s.WebhookOutboxSize(w.company.ID); n != 2 {
		t.Errorf("outbox: %d deliveries, want the 2 first ones only", n)
	}
}

// webhookEventShared: every delivery of an event sends its whole body with
// its own id first; the outbox counts the body once, until the last of its
// deliveries ends, and then nothing. An ended event's id may be used again.
func webhookEventShared(t *testing.T, s WebhooksStore) {
	w := webhookCompany(t, s, 20)
	big := strings.Repeat("x", 40000)
	body := `{"type":"sms.received","data":{"message":"` + big + `"}}`
	build := perEntry(T0, body)
	var evID string
	res, err := addEvent(s, w, T0, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		ev, ds, err := build(set)
		evID = ev.ID
		return ev, ds, err
	})
	if err != nil || res.Queued != 20 || res.Pending != 20 || res.PendingBytes != int64(len(body)) {
		t.Fatalf("add: %+v (%v), want 20 queued holding %d bytes", res, err, len(body))
	}
	ids, _ := dueIDs(t, s, T0, 100, nil)
	if len(ids) != 20 {
		t.Fatalf("due: %d, want 20", len(ids))
	}
	uuids := map[string]bool{}
	for i, id := range ids {
		job, err := s.WebhookJob(id)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				Message string `json:"message"`
			} `json:"data"`
		}
		if err := json.Unmarshal(job.Delivery.Body, &got); err != nil || got.ID != job.Delivery.UUID || uuids[got.ID] || got.Type != "sms.received" || got.Data.Message != big {
			t.Fatalf("delivery %d: id %q, %d characters (%v); want its own id and the whole text", id, got.ID, len(got.Data.Message), err)
		}
		uuids[got.ID] = true
		if _, err := s.RecordWebhookAttempt(id, 0, outcome(store.WebhookDelivered, T0)); err != nil {
			t.Fatal(err)
		}
		n, b, err := s.WebhookOutboxSize(w.company.ID)
		wantBytes := int64(len(body))
		if i == len(ids)-1 {
			wantBytes = 0
		}
		if err != nil || n != len(ids)-1-i || b != wantBytes {
			t.Fatalf("after %d of 20 ended: %d deliveries, %d bytes (%v); want %d, %d", i+1, n, b, err, len(ids)-1-i, wantBytes)
		}
	}
	if _, err := addEvent(s, w, T0, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		_, ds, _ := build(set)
		return store.WebhookEvent{ID: evID, Body: []byte(eventBody)}, ds[:1], nil
	}); err != nil {
		t.Fatalf("an ended event's id again: %v", err)
	}
	if ids, _ := dueIDs(t, s, T0, 100, nil); len(ids) != 1 {
		t.Fatalf("due: %d, want 1", len(ids))
	} else if job, err := s.WebhookJob(ids[0]); err != nil || string(job.Delivery.Body) != string(store.DeliveryBody(job.Delivery.UUID, []byte(eventBody))) {
		t.Fatalf("the new event's delivery: %s (%v), want the new body", job.Delivery.Body, err)
	}
}

// webhookOutboxBound: at the bound the event is queued; one delivery (or
// byte) more and each of its deliveries is a failed line of the log, with
// nothing queued; each company's outbox is its own.
func webhookOutboxBound(t *testing.T, s WebhooksStore) {
	a := webhookCompany(t, s, 2)
	b := webhookCompany(t, s, 2)
	lim := store.OutboxLimits{MaxDeliveries: 4, LogKeep: 100}
	add := func(w webhookTenant) store.OutboxAdd {
		t.Helper()
		res, err := addEvent(s, w, T0, lim, perEntry(T0, eventBody))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := add(a); res.Queued != 2 || res.Pending != 2 {
		t.Fatalf("first event: %+v, want 2 queued", res)
	}
	if res := add(a); res.Queued != 2 || res.Pending != 4 || res.PendingBytes != 2*int64(len(eventBody)) {
		t.Fatalf("second event, exactly at the bound: %+v, want 2 queued, 4 pending", res)
	}
	if res := add(a); res.Queued != 0 || res.Refused != 2 || res.Pending != 4 || res.PendingBytes != 2*int64(len(eventBody)) {
		t.Fatalf("third event: %+v, want 2 refused and 4 still pending", res)
	}
	if n, bytes, _ := s.WebhookOutboxSize(a.company.ID); n != 4 || bytes != 2*int64(len(eventBody)) {
		t.Fatalf("outbox: %d deliveries, %d bytes; want the 2 queued events'", n, bytes)
	}
	lines, err := s.WebhookAttempts(a.company.ID, 0, 10)
	if err != nil || len(lines) != 2 {
		t.Fatalf("log: %+v (%v), want the 2 refused deliveries", lines, err)
	}
	for _, limit := range []int{0, -1} {
		if none, err := s.WebhookAttempts(a.company.ID, 0, limit); err != nil || len(none) != 0 {
			t.Fatalf("log of limit %d: %d lines (%v), want none", limit, len(none), err)
		}
		if none, err := s.WebhookAttempts(a.company.ID, lines[0].WebhookID, limit); err != nil || len(none) != 0 {
			t.Fatalf("an entry's log of limit %d: %d lines (%v), want none", limit, len(none), err)
		}
	}
	for _, l := range lines {
		if l.State != store.WebhookFailed || !strings.Contains(l.Error, "outbox is full") || l.Attempt != 0 || l.CompanyID != a.company.ID ||
			l.WebhookID == 0 || l.EventID == "" || l.DeliveryID == "" || l.EventType != "sms.received" || !l.CreatedAt.Equal(T0) {
			t.Errorf("refused line %+v: want a failed line saying the outbox is full", l)
		}
	}
	if ids, _ := dueIDs(t, s, T0, 100, nil); len(ids) != 4 {
		t.Fatalf("due: %d, want the 4 queued", len(ids))
	}
	if res := add(b); res.Queued != 2 {
		t.Fatalf("another company: %+v, want 2 queued", res)
	}
	// By bytes: three bodies fit, a fourth does not.
	lim = store.OutboxLimits{MaxBytes: 3 * int64(len(eventBody))}
	if res := add(b); res.Queued != 2 {
		t.Fatalf("second event within the byte bound: %+v", res)
	}
	if res := add(b); res.Queued != 2 || res.PendingBytes != lim.MaxBytes {
		t.Fatalf("third event, exactly at the byte bound: %+v", res)
	}
	if res := add(b); res.Refused != 2 || res.Queued != 0 {
		t.Fatalf("fourth event, over the byte bound: %+v, want refused", res)
	}
}

// webhookOutboxBoundConcurrent: of events written at once from the
// company's devices, each is queued or refused whole, and the outbox counts
// exactly what was queued. Each is refused only when the outbox was full:
// at least the bound is queued. (The bound is a guard of the disk: bbolt
// holds it exactly, PostgreSQL may let the events in flight at once over
// it.)
func webhookOutboxBoundConcurrent(t *testing.T, s WebhooksStore) {
	w := webhookCompany(t, s, 2)
	tenants := []webhookTenant{w}
	for range 5 {
		other := w
		other.device = Device(t, s, w.company.ID, fmt.Sprintf("fp-%d", unique()))
		tenants = append(tenants, other)
	}
	const bound, events = 10, 24
	lim := store.OutboxLimits{MaxDeliveries: bound, LogKeep: 100}
	var mu sync.Mutex
	queued, refused := 0, 0
	var wg sync.WaitGroup
	for _, tn := range tenants {
		for range events / len(tenants) {
			wg.Go(func() {
				res, err := addEvent(s, tn, T0, lim, perEntry(T0, eventBody))
				if err != nil {
					t.Error(err)
				}
				if res.Queued+res.Refused != 2 || res.Queued != 0 && res.Refused != 0 {
					t.Errorf("an event of 2 deliveries: %+v, want it queued or refused whole", res)
				}
				mu.Lock()
				queued, refused = queued+res.Queued, refused+res.Refused
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if queued+refused != 2*events || queued < bound {
		t.Fatalf("%d events of 2 deliveries at once against a bound of %d: %d queued, %d refused", events, bound, queued, refused)
	}
	if n, b, _ := s.WebhookOutboxSize(w.company.ID); n != queued || b != int64(queued/2*len(eventBody)) {
		t.Fatalf("outbox: %d deliveries, %d bytes; want the %d queued", n, b, queued)
	}
	if ids, _ := dueIDs(t, s, T0, 100, nil); len(ids) != queued {
		t.Fatalf("due: %d deliveries, want the %d queued", len(ids), queued)
	}
	if lines, _ := s.WebhookAttempts(w.company.ID, 0, 100); len(lines) != refused {
		t.Fatalf("log: %d lines, want the %d refused", len(lines), refused)
	}
}

// webhookDue: deliveries come due in order of their due time; the answer
// says when to look again; skip sees each candidate in that order, with
// its entry and company, and what it passes over is not returned.
// webhookDuePassesFull: a pass asks skip of a company's due deliveries
// until it says the company is full (store.DuePassCompany), and of an
// entry's until it says the entry is (store.DuePassEntry), and no more
// after that; the other deliveries it sees and returns in due order, as
// with no full company. A company with 300 due (more than a page of
// PostgreSQL's) is asked once.
func webhookDuePassesFull(t *testing.T, s WebhooksStore, otherGap time.Duration) {
	full := webhookCompany(t, s, 2)
	other := webhookCompany(t, s, 2)
	spread := func(n int, first, gap time.Duration) func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		return func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
			var out []store.WebhookDelivery
			for i := range n {
				at := T0.Add(first + time.Duration(i)*gap)
				out = append(out, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d", unique()), EventType: "sms.received",
					WebhookID: set.Entries[i%len(set.Entries)].ID, CreatedAt: at, NextAttemptAt: at})
			}
			return store.WebhookEvent{ID: fmt.Sprintf("ev-%d", unique()), Body: []byte(eventBody)}, out, nil
		}
	}
	// full's 300 due every other second from T0, other's 6 between them
	// (otherGap apart); one more of other's due later.
	for _, add := range []struct {
		w          webhookTenant
		n          int
		first, gap time.Duration
	}{{full, 300, 0, 2 * time.Second}, {other, 6, time.Second, otherGap}, {other, 1, time.Hour, 0}} {
		if res, err := addEvent(s, add.w, T0, store.OutboxLimits{}, spread(add.n, add.first, add.gap)); err != nil || res.Queued != add.n {
			t.Fatalf("add %d deliveries: %+v (%v)", add.n, res, err)
		}
	}
	now := T0.Add(30 * time.Minute)
	all, _ := dueIDs(t, s, now, 1000, nil)
	if len(all) != 306 {
		t.Fatalf("%d due, want 306", len(all))
	}
	var asked []store.WebhookDue
	passEntry := other.set.Entries[1].ID
	due, next, err := s.DueWebhookDeliveries(now, 1000, func(d store.WebhookDue) store.DueVerdict {
		asked = append(asked, d)
		switch {
		case d.CompanyID == full.company.ID:
			return store.DuePassCompany
		case d.WebhookID == passEntry:
			return store.DuePassEntry
		}
		return store.DueTake
	})
	if err != nil || !next.Equal(T0.Add(time.Hour)) {
		t.Fatalf("due: %+v, next %v (%v); want the later delivery's due time next", due, next, err)
	}
	// other's 6 alternate between its entries, the first on entry 0: the
	// pass takes entry 0's 3 and asks once of entry 1.
	if len(due) != 3 || len(asked) != 5 {
		t.Fatalf("took %+v after asking of %+v; want other's 3 on entry 0 after asking of those, one of full's and one of entry 1's", due, asked)
	}
	var fullAsked, entryAsked int
	for _, d := range asked {
		switch {
		case d.CompanyID == full.company.ID:
			fullAsked++
		case d.WebhookID == passEntry:
			entryAsked++
		}
	}
	if fullAsked != 1 || entryAsked != 1 || asked[0].CompanyID != full.company.ID {
		t.Fatalf("asked of %+v; want full's first delivery once, then none of full's, and one of entry %d", asked, passEntry)
	}
	for i, d := range due {
		if d.CompanyID != other.company.ID || d.WebhookID != other.set.Entries[0].ID || (i > 0 && d.ID <= due[i-1].ID) {
			t.Fatalf("took %+v, want other's entry 0's in due order", due)
		}
	}
	// With the limit reached, more due says so.
	if due, next, err := s.DueWebhookDeliveries(now, 2, func(d store.WebhookDue) store.DueVerdict {
		if d.CompanyID == full.company.ID {
			return store.DuePassCompany
		}
		return store.DueTake
	}); err != nil || len(due) != 2 || !next.Equal(now) {
		t.Fatalf("limit 2: %+v, next %v (%v); want 2 of other's and now", due, next, err)
	}
}

func webhookDue(t *testing.T, s WebhooksStore) {
	a := webhookCompany(t, s, 1)
	b := webhookCompany(t, s, 1)
	// Written out of order: b's event is due first.
	mustAdd(t, s, a, T0.Add(time.Second))
	mustAdd(t, s, a, T0.Add(2*time.Second))
	mustAdd(t, s, b, T0)
	if ids, next := dueIDs(t, s, T0.Add(-time.Second), 10, nil); len(ids) != 0 || !next.Equal(T0) {
		t.Fatalf("before anything is due: %v, next %v; want none and %v", ids, next, T0)
	}
	var seen []store.WebhookDue
	due, next, err := s.DueWebhookDeliveries(T0.Add(time.Second), 10, store.SkipIf(func(d store.WebhookDue) bool { seen = append(seen, d); return false }))
	if err != nil || len(due) != 2 || !next.Equal(T0.Add(2*time.Second)) {
		t.Fatalf("due at +1s: %+v, next %v (%v); want 2 and the third's due time", due, next, err)
	}
	if due[0].CompanyID != b.company.ID || due[0].WebhookID != b.set.Entries[0].ID || due[1].CompanyID != a.company.ID || due[1].WebhookID != a.set.Entries[0].ID {
		t.Fatalf("due: %+v, want b's delivery then a's, with their entries", due)
	}
	if len(seen) != 2 || seen[0] != due[0] || seen[1] != due[1] {
		t.Fatalf("skip saw %+v, want %+v", seen, due)
	}
	first, second := due[0].ID, due[1].ID
	all, next := dueIDs(t, s, T0.Add(time.Hour), 10, nil)
	if len(all) != 3 || all[0] != first || all[1] != second || !next.IsZero() {
		t.Fatalf("all due: %v, next %v; want 3 in due order and nothing later", all, next)
	}
	if ids, next := dueIDs(t, s, T0.Add(time.Hour), 1, nil); len(ids) != 1 || ids[0] != first || !next.Equal(T0.Add(time.Hour)) {
		t.Fatalf("limit 1: %v, next %v; want [%d] and now, as more are due", ids, next, first)
	}
	if ids, next := dueIDs(t, s, T0.Add(time.Hour), 2, func(id uint64) bool { return id == first }); len(ids) != 2 || ids[0] != second || ids[1] != all[2] || !next.IsZero() {
		t.Fatalf("skipping %d: %v, next %v; want the other two", first, ids, next)
	}
	if ids, next := dueIDs(t, s, T0.Add(time.Hour), 10, func(uint64) bool { return true }); len(ids) != 0 || !next.IsZero() {
		t.Fatalf("skipping all: %v, next %v; want none, nothing later", ids, next)
	}
	// A retry moves a delivery to its new due time; an ended one is gone.
	if _, err := s.RecordWebhookAttempt(first, 0, func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt {
		return store.WebhookAttempt{State: store.WebhookPending, CreatedAt: T0, NextAttemptAt: T0.Add(time.Minute)}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordWebhookAttempt(second, 0, outcome(store.WebhookFailed, T0)); err != nil {
		t.Fatal(err)
	}
	if ids, next := dueIDs(t, s, T0.Add(30*time.Second), 10, nil); len(ids) != 1 || ids[0] != all[2] || !next.Equal(T0.Add(time.Minute)) {
		t.Fatalf("after a retry and an end: %v, next %v; want the third, then the retry at +1m", ids, next)
	}
	if ids, _ := dueIDs(t, s, T0.Add(time.Hour), 10, nil); len(ids) != 2 || ids[0] != all[2] || ids[1] != first {
		t.Fatalf("later: %v, want the third and the retry", ids)
	}
}

// webhookAttempts: an attempt's line carries the delivery's identity and
// its number; a pending line moves the delivery to its retry, an ended one
// removes it; what decide changes of the entry's health is stored; the log
// reads newest first, by entry, and only the company's own.
func webhookAttempts(t *testing.T, s WebhooksStore) {
	w := webhookCompany(t, s, 1)
	other := webhookCompany(t, s, 1)
	mustAdd(t, s, w, T0)
	mustAdd(t, s, other, T0)
	ids, _ := dueIDs(t, s, T0, 10, nil)
	job, err := s.WebhookJob(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	if job.Delivery.CompanyID != w.company.ID {
		id = ids[1]
		job, _ = s.WebhookJob(id)
	}
	retryAt := T0.Add(time.Hour)
	a, err := s.RecordWebhookAttempt(id, 0, func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt {
		if d.ID != id || d.Attempts != 0 || e == nil || e.ID != w.set.Entries[0].ID {
			t.Errorf("decide got %+v, entry %+v", d, e)
		}
		if e != nil {
			e.FailingSince = T0
		}
		return store.WebhookAttempt{State: store.WebhookPending, StatusCode: 500, Error: "boom", DurationMS: 12, CreatedAt: T0, NextAttemptAt: retryAt}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := store.WebhookAttempt{ID: a.ID, CompanyID: w.company.ID, WebhookID: w.set.Entries[0].ID, EventID: job.Delivery.EventID, DeliveryID: job.Delivery.UUID,
		EventType: "sms.received", Attempt: 1, State: store.WebhookPending, StatusCode: 500, Error: "boom", DurationMS: 12, CreatedAt: T0, NextAttemptAt: retryAt}
	if a.ID == 0 || !sameAttempt(a, want) {
		t.Fatalf("line: %+v, want %+v", a, want)
	}
	if set, _ := s.WebhookSet(w.company.ID); !set.Entries[0].FailingSince.Equal(T0) {
		t.Fatalf("entry after decide marked it failing: %+v", set.Entries[0])
	}
	if job, err := s.WebhookJob(id); err != nil || job.Delivery.Attempts != 1 || !job.Delivery.NextAttemptAt.Equal(retryAt) {
		t.Fatalf("delivery after a retry: %+v (%v), want 1 attempt, due at %v", job.Delivery, err, retryAt)
	}
	// The entry disabled by an attempt stays disabled.
	rec := s.RecordWebhookAttemptLater(id, 0, func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt {
		if d.Attempts != 1 {
			t.Errorf("decide: %d attempts so far, want 1", d.Attempts)
		}
		e.Active, e.DisabledAt, e.DisabledReason = false, retryAt, "gone"
		return store.WebhookAttempt{State: store.WebhookFailed, StatusCode: 410, CreatedAt: retryAt, NextAttemptAt: retryAt}
	})
	last, err := rec.Wait()
	if err != nil || last.State != store.WebhookFailed || last.Attempt != 2 || !last.NextAttemptAt.IsZero() || last.DeliveryID != job.Delivery.UUID {
		t.Fatalf("the last attempt: %+v (%v), want attempt 2, failed, without a next attempt", last, err)
	}
	if set, _ := s.WebhookSet(w.company.ID); set.Entries[0].Active || !set.Entries[0].DisabledAt.Equal(retryAt) || set.Entries[0].DisabledReason != "gone" {
		t.Fatalf("entry after decide disabled it: %+v", set.Entries[0])
	}
	if _, err := s.WebhookJob(id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an ended delivery: %v, want ErrNotFound", err)
	}
	if _, err := s.RecordWebhookAttempt(id, 0, outcome(store.WebhookDelivered, retryAt)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an attempt at an ended delivery: %v, want ErrNotFound", err)
	}
	if _, err := s.RecordWebhookAttemptLater(id, 0, outcome(store.WebhookDelivered, retryAt)).Wait(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a later attempt at an ended delivery: %v, want ErrNotFound", err)
	}
	if n, b, _ := s.WebhookOutboxSize(w.company.ID); n != 0 || b != 0 {
		t.Fatalf("outbox after the end: %d, %d bytes", n, b)
	}
	lines, err := s.WebhookAttempts(w.company.ID, 0, 10)
	if err != nil || len(lines) != 2 || !sameAttempt(lines[0], last) || !sameAttempt(lines[1], a) {
		t.Fatalf("log: %+v (%v), want the failed attempt 2 then the pending one", lines, err)
	}
	if lines, _ := s.WebhookAttempts(w.company.ID, 0, 1); len(lines) != 1 || lines[0].ID != last.ID {
		t.Fatalf("log limit 1: %+v, want the newest", lines)
	}
	if lines, _ := s.WebhookAttempts(w.company.ID, w.set.Entries[0].ID, 10); len(lines) != 2 {
		t.Fatalf("log of the entry: %d lines, want 2", len(lines))
	}
	if lines, _ := s.WebhookAttempts(w.company.ID, other.set.Entries[0].ID, 10); len(lines) != 0 {
		t.Fatalf("log by another company's entry: %d lines, want 0", len(lines))
	}
	if lines, _ := s.WebhookAttempts(other.company.ID, 0, 10); len(lines) != 0 {
		t.Fatalf("another company's log: %d lines, want 0", len(lines))
	}
	// An attempt whose entry was removed meanwhile gets nil and is recorded.
	if _, err := s.UpdateWebhookSet(other.company.ID, T0, func(set *store.WebhookSet) error { set.Entries = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	oid := ids[0] + ids[1] - id
	if job, err := s.WebhookJob(oid); err != nil || job.Entry != nil || job.Secret != other.set.Secret {
		t.Fatalf("a delivery of a removed entry: %+v (%v), want no entry", job, err)
	}
	if a, err := s.RecordWebhookAttempt(oid, 0, func(_ store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt {
		if e != nil {
			t.Errorf("decide got entry %+v, want nil", e)
		}
		return store.WebhookAttempt{State: store.WebhookFailed, CreatedAt: T0}
	}); err != nil || a.CompanyID != other.company.ID || a.Attempt != 1 {
		t.Fatalf("attempt of a removed entry: %+v (%v)", a, err)
	}
}

// sameAttempt compares lines, their times as instants.
func sameAttempt(a, b store.WebhookAttempt) bool {
	ta, tb := a.CreatedAt, b.CreatedAt
	na, nb := a.NextAttemptAt, b.NextAttemptAt
	a.CreatedAt, b.CreatedAt, a.NextAttemptAt, b.NextAttemptAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && na.Equal(nb)
}

// webhookAttemptsConcurrent: attempts recorded at once on one delivery are
// numbered one after the other; of two that end it at once one wins, the
// other finds it gone, and the outbox counts the end once.
func webhookAttemptsConcurrent(t *testing.T, s WebhooksStore) {
	w := webhookCompany(t, s, 1)
	mustAdd(t, s, w, T0)
	mustAdd(t, s, w, T0)
	ids, _ := dueIDs(t, s, T0, 10, nil)
	const n = 8
	var wg sync.WaitGroup
	recs := make([]store.AttemptRecord, n)
	for i := range n {
		wg.Go(func() { recs[i] = s.RecordWebhookAttemptLater(ids[0], 0, outcome(store.WebhookPending, T0)) })
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, r := range recs {
		a, err := r.Wait()
		if err != nil || a.Attempt < 1 || a.Attempt > n || seen[a.Attempt] {
			t.Fatalf("attempt %+v (%v): want numbers 1 to %d, each once", a, err, n)
		}
		seen[a.Attempt] = true
	}
	if job, _ := s.WebhookJob(ids[0]); job.Delivery.Attempts != n {
		t.Fatalf("%d attempts counted, want %d", job.Delivery.Attempts, n)
	}
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.RecordWebhookAttempt(ids[1], 0, outcome(store.WebhookDelivered, T0)) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), store.ErrNotFound) {
		t.Fatalf("two ends at once: %v, want one to end it and the other ErrNotFound", errs)
	}
	if d, b, _ := s.WebhookOutboxSize(w.company.ID); d != 1 || b != int64(len(eventBody)) {
		t.Fatalf("outbox: %d deliveries, %d bytes; want the other one", d, b)
	}
	if lines, _ := s.WebhookAttempts(w.company.ID, 0, 100); len(lines) != n+1 {
		t.Fatalf("log: %d lines, want %d", len(lines), n+1)
	}
}

// webhookLogCapped: the log keeps each company's newest keep lines on
// every write, whatever another company writes; after a prune the company
// may write keep lines again before the cap drops any.
func webhookLogCapped(t *testing.T, s WebhooksStore) {
	a := webhookCompany(t, s, 1)
	b := webhookCompany(t, s, 1)
	record := func(w webhookTenant, i int) {
		t.Helper()
		at := T0.Add(time.Duration(i) * time.Minute)
		mustAdd(t, s, w, at)
		ids, _ := dueIDs(t, s, at, 10, nil)
		for _, id := range ids {
			if _, err := s.RecordWebhookAttempt(id, 3, outcome(store.WebhookDelivered, at)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 5 {
		record(a, i)
	}
	record(b, 10)
	lines, _ := s.WebhookAttempts(a.company.ID, 0, 100)
	if len(lines) != 3 || !lines[0].CreatedAt.Equal(T0.Add(4*time.Minute)) || !lines[2].CreatedAt.Equal(T0.Add(2*time.Minute)) {
		t.Fatalf("company a: %d lines, want its newest 3", len(lines))
	}
	if lines, _ := s.WebhookAttempts(b.company.ID, 0, 100); len(lines) != 1 {
		t.Fatalf("company b: %d lines, want 1: another company's writes drop nothing of it", len(lines))
	}
	if n, err := s.PruneWebhookAttempts(T0.Add(10*time.Minute), 3); err != nil || n != 3 {
		t.Fatalf("prune: %d (%v), want a's 3", n, err)
	}
	for i := 11; i < 14; i++ {
		record(a, i)
	}
	if lines, _ := s.WebhookAttempts(a.company.ID, 0, 100); len(lines) != 3 {
		t.Fatalf("after the prune: %d lines, want 3", len(lines))
	}
	record(a, 14)
	if lines, _ := s.WebhookAttempts(a.company.ID, 0, 100); len(lines) != 3 || !lines[2].CreatedAt.Equal(T0.Add(12*time.Minute)) {
		t.Fatalf("over the cap again: %d lines, want the newest 3", len(lines))
	}
}

// webhookPrune: the prune drops lines older than the cutoff and, per
// company, all but the newest keep, and says how many it dropped.
func webhookPrune(t *testing.T, s WebhooksStore) {
	var tenants []webhookTenant
	for range 2 {
		w := webhookCompany(t, s, 1)
		tenants = append(tenants, w)
		for i := range 5 {
			at := T0.Add(time.Duration(i) * time.Hour)
			mustAdd(t, s, w, at)
			ids, _ := dueIDs(t, s, at, 10, nil)
			for _, id := range ids {
				if _, err := s.RecordWebhookAttempt(id, 0, outcome(store.WebhookFailed, at)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if n, err := s.PruneWebhookAttempts(T0.Add(time.Hour), 3); err != nil || n != 4 {
		t.Fatalf("prune: %d (%v), want 4 (two per company)", n, err)
	}
	for _, w := range tenants {
		lines, _ := s.WebhookAttempts(w.company.ID, 0, 100)
		if len(lines) != 3 || !lines[2].CreatedAt.Equal(T0.Add(2*time.Hour)) {
			t.Fatalf("company %d: %d lines, want the newest 3", w.company.ID, len(lines))
		}
	}
	if n, _ := s.PruneWebhookAttempts(T0.Add(4*time.Hour), 3); n != 4 {
		t.Fatalf("by age: %d pruned, want 4 (all but the newest of each company)", n)
	}
	if n, _ := s.PruneWebhookAttempts(T0, 0); n != 0 {
		t.Fatalf("nothing older, no cap: %d pruned, want 0", n)
	}
	for _, w := range tenants {
		if lines, _ := s.WebhookAttempts(w.company.ID, 0, 100); len(lines) != 1 || !lines[0].CreatedAt.Equal(T0.Add(4*time.Hour)) {
			t.Fatalf("company %d: %+v, want its newest line", w.company.ID, lines)
		}
	}
}
