package boltstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// webhookFixture is a company with one device and a webhook set of n active entries.
func webhookFixture(t *testing.T, s *Store, email string, n int) (Company, WebhookSet) {
	t.Helper()
	c, _ := newCompany(t, s, email, "key-"+email)
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp-" + email, CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte("tok-" + email)}}); err != nil {
		t.Fatal(err)
	}
	set, err := s.UpdateWebhookSet(c.ID, time.Now(), func(w *WebhookSet) error {
		w.Secret = "whsec_test"
		for i := range n {
			w.Entries = append(w.Entries, WebhookEntry{URL: fmt.Sprintf("https://hooks.example.com/%d", i), Active: true})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, set
}

// oneDeliveryPerEntry is the outbox build of these tests: one event (its id
// from at) with one delivery per entry.
func oneDeliveryPerEntry(at time.Time) func(WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
	return func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
		ev := WebhookEvent{ID: fmt.Sprintf("ev-%d", at.UnixNano()), Body: []byte(`{"type":"sms.received"}`)}
		var out []WebhookDelivery
		for _, e := range set.Entries {
			out = append(out, WebhookDelivery{UUID: fmt.Sprintf("d-%d-%d", e.ID, at.UnixNano()), EventType: "sms.received",
				WebhookID: e.ID, CreatedAt: at, NextAttemptAt: at})
		}
		return ev, out, nil
	}
}

// addDeliveries is the outbox write of these tests, without limits.
func addDeliveries(s *Store, tx *bolt.Tx, companyID uint64, at time.Time) (int, error) {
	res, err := s.addWebhookEvent(tx, companyID, at, OutboxLimits{}, oneDeliveryPerEntry(at))
	return res.Queued, err
}

// dueIDs is DueWebhookDeliveries by delivery id alone.
func dueIDs(s *Store, now time.Time, limit int, skip func(id uint64) bool) ([]uint64, time.Time, error) {
	var by func(d WebhookDue) bool
	if skip != nil {
		by = func(d WebhookDue) bool { return skip(d.ID) }
	}
	due, next, err := s.DueWebhookDeliveries(now, limit, by)
	ids := make([]uint64, len(due))
	for i, d := range due {
		ids[i] = d.ID
	}
	return ids, next, err
}

func TestDueOf(t *testing.T) {
	t.Parallel()
	raw, _ := json.Marshal(WebhookDelivery{ID: 7, UUID: "u", CompanyID: 3, WebhookID: 42, Body: []byte(`{"big":"body"}`)})
	if d, err := dueOf(raw); err != nil || d.WebhookID != 42 || d.CompanyID != 3 {
		t.Fatalf("stored row: got %+v %v, want webhook 42 of company 3", d, err)
	}
	if d, err := dueOf([]byte(`{"body":"e30=","nested":{"webhook_id":1},"webhook_id":9}`)); err != nil || d.WebhookID != 9 {
		t.Fatalf("field after the body: got %+v %v, want 9", d, err)
	}
	if _, err := dueOf([]byte(`{"id":1}`)); err == nil {
		t.Fatal("a row without webhook_id: got no error")
	}
}

// A pass over the due index reads each due delivery's entry and company
// from the index, decoding no delivery row: while the entries' bounds hold
// a backlog back, the dispatcher passes over all of it after every attempt,
// so its cost per row is what keeps a long backlog flowing. Counted in
// allocations, which a row's JSON takes dozens of.
func TestDuePassDecodesNoRow(t *testing.T) { // not parallel: AllocsPerRun counts the whole process
	s := open(t, t.TempDir())
	c, _ := webhookFixture(t, s, "a@example.com", 1)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	const backlog = 500
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for i := range backlog {
			if _, err := addDeliveries(s, tx, c.ID, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	skipAll := func(d WebhookDue) bool {
		if d.CompanyID != c.ID || d.WebhookID == 0 {
			t.Errorf("due %+v: want the company's entry", d)
		}
		seen++
		return true
	}
	allocs := testing.AllocsPerRun(5, func() {
		if _, _, err := s.DueWebhookDeliveries(t0.Add(time.Hour), 64, skipAll); err != nil {
			t.Fatal(err)
		}
	})
	if seen != 6*backlog { // AllocsPerRun runs it once more to warm up
		t.Fatalf("the skip saw %d rows, want %d", seen, 6*backlog)
	}
	// The row's lookup (that it still exists) takes about 2; decoding it took about 80.
	if allocs > 5*backlog {
		t.Fatalf("a pass over %d due deliveries made %.0f allocations, want at most 5 a row (its lookup), none to decode it", backlog, allocs)
	}
}
