package webhook

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// BenchmarkDispatchPassFullCompany is one pass of the dispatcher over the
// due deliveries while one company's receivers hang: it has 10,000 due
// across its 4 entries and as many attempts under way as it may, and
// another company has 10 due across 2 entries. The pass hands out the 4
// of those its company's bound lets through.
// (DueWebhookDeliveries, which ClaimWebhookDeliveries reads the same way
// on one node; on PostgreSQL a claim also leases what it takes.)
//
//	go test ./webhook -run '^$' -bench DispatchPassFullCompany -benchtime 200x
func BenchmarkDispatchPassFullCompany(b *testing.B) {
	st, tenant := dueTenants(b)
	hanging := tenant("hanging", 4, 10, 1000)
	tenant("other", 2, 1, 10)
	svc, err := New(Config{Workers: 8, PerCompany: 4}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	set, err := st.WebhookSet(hanging)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range set.Entries[:2] { // 4 attempts under way on two of its entries
		for range 2 {
			svc.take(store.WebhookDue{ID: e.ID<<32 | uint64(svc.perEntry[e.ID]), WebhookID: e.ID, CompanyID: hanging})
		}
	}
	now := time.Now()
	for b.Loop() {
		due, _, err := st.DueWebhookDeliveries(now, dispatchBatch, svc.skipper())
		if err != nil || len(due) != 4 {
			b.Fatalf("a pass took %d (%v), want 4 of the other company's", len(due), err)
		}
	}
}

// BenchmarkDispatchPassFullCompanies is one pass of the dispatcher where 50
// companies of 20 webhook entries each are at their bound of attempts under
// way (their receivers hang), 200 deliveries due on each (10,000 in all),
// beside another company with 10 due over 2 entries, of which the pass
// hands out 4: once the walk in due order has passed over DueWalkPast of
// the full companies' deliveries, it goes on by entry, and a full company
// is passed over in one step, not one for each of its 20 entries.
//
//	go test ./webhook -run '^$' -bench DispatchPassFullCompanies -benchtime 200x
//	SIMRELAY_TEST_STORE=postgres go test ./webhook -run '^$' -bench DispatchPassFullCompanies -benchtime 50x
func BenchmarkDispatchPassFullCompanies(b *testing.B) {
	st, tenant := dueTenants(b)
	var hanging []uint64
	for i := range 50 {
		hanging = append(hanging, tenant(fmt.Sprintf("hanging%02d", i), 20, 10, 20))
	}
	tenant("other", 2, 1, 10)
	svc, err := New(Config{Workers: 8, PerCompany: 4}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range hanging {
		set, err := st.WebhookSet(c)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range set.Entries[:2] { // 4 attempts under way on two of its entries
			for range 2 {
				svc.take(store.WebhookDue{ID: e.ID<<32 | uint64(svc.perEntry[e.ID]), WebhookID: e.ID, CompanyID: c})
			}
		}
	}
	now := time.Now()
	for b.Loop() {
		due, _, err := st.DueWebhookDeliveries(now, dispatchBatch, svc.skipper())
		if err != nil || len(due) != 4 {
			b.Fatalf("a pass took %d (%v), want 4 of the other company's", len(due), err)
		}
	}
}

// dueTenants opens a store whose device events each queue a company's
// number of deliveries (each), due an hour ago a millisecond apart across
// its entries, and returns it with a maker of such companies: entries
// webhook entries, events events of each deliveries.
func dueTenants(b *testing.B) (store.Backend, func(name string, entries, events, each int) uint64) {
	st := storetest.OpenWith(b, storetest.Options{})
	t0 := time.Now().Add(-time.Hour).UTC()
	perEvent := map[uint64]int{}
	st.SetDeviceEvents(store.DeviceEvents{Build: func(set store.WebhookSet, d store.Device, ev store.DeviceEvent) (store.WebhookEvent, []store.WebhookDelivery, error) {
		out := make([]store.WebhookDelivery, perEvent[set.CompanyID])
		for i := range out {
			out[i] = store.WebhookDelivery{UUID: fmt.Sprintf("%s-%d", ev.Type, i), EventType: "sms.received",
				WebhookID: set.Entries[i%len(set.Entries)].ID, CreatedAt: t0, NextAttemptAt: t0.Add(time.Duration(i) * time.Millisecond)}
		}
		return store.WebhookEvent{ID: ev.Type, Body: []byte(`{"type":"sms.received"}`)}, out, nil
	}})
	tenant := func(name string, entries, events, each int) uint64 {
		c := storetest.Company(b, st, name, name+"@example.com")
		if err := st.ProvisionDevices([]store.Device{{Fingerprint: "fp-" + name, CompanyID: c.ID, Status: store.DeviceActive, TokenHash: []byte("t-" + name)}}); err != nil {
			b.Fatal(err)
		}
		d, err := st.CompanyDevice(c.ID, "fp-"+name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.UpdateWebhookSet(c.ID, t0, func(w *store.WebhookSet) error {
			for i := range entries {
				w.Entries = append(w.Entries, store.WebhookEntry{URL: fmt.Sprintf("https://hooks.example.com/%d", i), Active: true})
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		perEvent[c.ID] = each
		for i := range events {
			if _, err := st.UpdateDeviceWith(c.ID, d.ID, func(*store.Device) ([]store.DeviceEvent, error) {
				return []store.DeviceEvent{{Type: fmt.Sprintf("ev-%s-%d", name, i), At: t0}}, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		return c.ID
	}
	return st, tenant
}

// BenchmarkDispatchPassManyEntries is one pass of the dispatcher where no
// company is at its bound: 50 companies of 20 entries each, 2 deliveries
// due on every entry (2,000 due across 1,000 entries). The pass hands out
// a batch (dispatchBatch), oldest first.
//
//	go test ./webhook -run '^$' -bench DispatchPassManyEntries -benchtime 200x
func BenchmarkDispatchPassManyEntries(b *testing.B) {
	st, tenant := dueTenants(b)
	for i := range 50 {
		tenant(fmt.Sprint("t", i), 20, 1, 40)
	}
	svc, err := New(Config{Workers: 8, PerCompany: 4}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for b.Loop() {
		due, _, err := st.DueWebhookDeliveries(now, dispatchBatch, svc.skipper())
		if err != nil || len(due) != dispatchBatch {
			b.Fatalf("a pass took %d (%v), want %d", len(due), err, dispatchBatch)
		}
	}
}
