package boltstore

import (
	"encoding/json"
	"errors"
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

func TestWebhookSetKeepsAndAssignsIDs(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, set := webhookFixture(t, s, "a@example.com", 2)
	if set.Entries[0].ID == 0 || set.Entries[1].ID == set.Entries[0].ID || set.Entries[0].CreatedAt.IsZero() {
		t.Fatalf("got entries %+v, want distinct ids and a creation time", set.Entries)
	}
	kept := set.Entries[1]
	set, err := s.UpdateWebhookSet(c.ID, time.Now(), func(w *WebhookSet) error {
		w.Entries = []WebhookEntry{kept, {URL: "https://new.example.com"}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Entries[0].ID; got != kept.ID {
		t.Errorf("kept entry: got id %d, want %d", got, kept.ID)
	}
	if got := set.Entries[1].ID; got <= kept.ID {
		t.Errorf("new entry: got id %d, want a new id above %d", got, kept.ID)
	}
	// A refused change stores nothing.
	boom := errors.New("refused")
	if _, err := s.UpdateWebhookSet(c.ID, time.Now(), func(w *WebhookSet) error { w.Entries = nil; return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the refusal", err)
	}
	got, err := s.WebhookSet(c.ID)
	if err != nil || len(got.Entries) != 2 || got.Secret != "whsec_test" {
		t.Fatalf("got %+v (%v), want the two entries and the secret unchanged", got, err)
	}
	// Another company has its own, empty set.
	other, _ := newCompany(t, s, "b@example.com", "kb")
	if got, err := s.WebhookSet(other.ID); err != nil || len(got.Entries) != 0 || got.Secret != "" {
		t.Fatalf("other company: got %+v (%v), want an empty set", got, err)
	}
}

func TestWebhookDueIndexAndAttempts(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, set := webhookFixture(t, s, "a@example.com", 1)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// Three events a second apart, one delivery each.
	for i := range 3 {
		at := t0.Add(time.Duration(i) * time.Second)
		if err := s.db.Update(func(tx *bolt.Tx) error {
			_, err := addDeliveries(s, tx, c.ID, at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	ids, next, err := dueIDs(s, t0.Add(time.Second), 10, nil)
	if err != nil || len(ids) != 2 || !next.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("got %v next %v (%v), want the first two and the third's due time", ids, next, err)
	}
	first, second := ids[0], ids[1]
	if ids, next, _ := dueIDs(s, t0.Add(time.Hour), 1, nil); len(ids) != 1 || ids[0] != first || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("limit 1: got %v next %v, want [%d] and now (more are due)", ids, next, first)
	}
	if ids, _, _ := dueIDs(s, t0.Add(time.Hour), 10, func(id uint64) bool { return id == first }); len(ids) != 2 || ids[0] != second {
		t.Fatalf("skipping %d: got %v", first, ids)
	}

	// A failed attempt moves the first delivery to its retry and marks the entry failing.
	retryAt := t0.Add(time.Hour)
	a, err := s.RecordWebhookAttempt(first, 0, func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt {
		e.FailingSince = t0
		return WebhookAttempt{State: WebhookPending, StatusCode: 500, Error: "boom", CreatedAt: t0, NextAttemptAt: retryAt}
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Attempt != 1 || a.WebhookID != set.Entries[0].ID || a.CompanyID != c.ID || a.DeliveryID == "" || a.EventType != "sms.received" {
		t.Fatalf("got log line %+v, want attempt 1 with the delivery's identity", a)
	}
	if ids, _, _ := dueIDs(s, t0.Add(time.Minute), 10, nil); len(ids) != 2 || ids[0] == first {
		t.Fatalf("after the retry was scheduled: got %v, want the other two only", ids)
	}
	got, _ := s.WebhookSet(c.ID)
	if !got.Entries[0].FailingSince.Equal(t0) {
		t.Fatalf("got failing since %v, want %v", got.Entries[0].FailingSince, t0)
	}
	// A success ends the delivery: the outbox row goes, the log keeps both lines.
	if _, err := s.RecordWebhookAttempt(first, 0, func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt {
		if d.Attempts != 1 {
			t.Errorf("got %d attempts so far, want 1", d.Attempts)
		}
		return WebhookAttempt{State: WebhookDelivered, StatusCode: 204, CreatedAt: retryAt, NextAttemptAt: retryAt}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebhookJob(first); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delivered delivery: got %v, want ErrNotFound", err)
	}
	if _, err := s.RecordWebhookAttempt(first, 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt { return WebhookAttempt{} }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("recording on an ended delivery: got %v, want ErrNotFound", err)
	}
	lines, err := s.WebhookAttempts(c.ID, 0, 10)
	if err != nil || len(lines) != 2 {
		t.Fatalf("got %d lines (%v), want 2", len(lines), err)
	}
	if lines[0].State != WebhookDelivered || lines[0].Attempt != 2 || !lines[0].NextAttemptAt.IsZero() || lines[1].State != WebhookPending {
		t.Fatalf("got %+v, want the delivered attempt 2 first, without a next attempt, then the pending one", lines)
	}
	if lines, _ := s.WebhookAttempts(c.ID, set.Entries[0].ID+100, 10); len(lines) != 0 {
		t.Fatalf("filter by another entry: got %d lines, want 0", len(lines))
	}
	other, _ := newCompany(t, s, "b@example.com", "kb")
	if lines, _ := s.WebhookAttempts(other.ID, 0, 10); len(lines) != 0 {
		t.Fatalf("another company: got %d lines, want 0", len(lines))
	}
}

func TestPruneWebhookAttempts(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	companies := map[uint64]int{}
	for _, email := range []string{"a@example.com", "b@example.com"} {
		c, _ := webhookFixture(t, s, email, 1)
		companies[c.ID] = 0
		for i := range 5 {
			at := t0.Add(time.Duration(i) * time.Hour)
			if err := s.db.Update(func(tx *bolt.Tx) error {
				_, err := addDeliveries(s, tx, c.ID, at)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		ids, _, _ := dueIDs(s, t0.Add(24*time.Hour), 10, nil)
		for i, id := range ids {
			if _, err := s.RecordWebhookAttempt(id, 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
				return WebhookAttempt{State: WebhookFailed, CreatedAt: t0.Add(time.Duration(i) * time.Hour)}
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Keep at most 3 per company, and none from before t0+1h.
	n, err := s.PruneWebhookAttempts(t0.Add(time.Hour), 3)
	if err != nil || n != 4 {
		t.Fatalf("got %d pruned (%v), want 4 (two per company)", n, err)
	}
	for id := range companies {
		lines, _ := s.WebhookAttempts(id, 0, 100)
		if len(lines) != 3 || lines[2].CreatedAt.Before(t0.Add(2*time.Hour)) {
			t.Fatalf("company %d: got %d lines, oldest %v; want the newest 3", id, len(lines), lines[len(lines)-1].CreatedAt)
		}
	}
	if n, _ := s.PruneWebhookAttempts(t0.Add(4*time.Hour), 3); n != 4 {
		t.Fatalf("by age: got %d pruned, want 4 (all but the newest of each company)", n)
	}
}

// The log keeps each company's newest lines on every write, and the prune
// recounts what is left.
func TestWebhookLogCappedOnWrite(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	a, _ := webhookFixture(t, s, "a@example.com", 1)
	b, _ := webhookFixture(t, s, "b@example.com", 1)
	record := func(c Company, i int) {
		t.Helper()
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := s.db.Update(func(tx *bolt.Tx) error {
			_, err := addDeliveries(s, tx, c.ID, at)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ids, _, _ := dueIDs(s, at, 10, nil)
		for _, id := range ids {
			if _, err := s.RecordWebhookAttempt(id, 3, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
				return WebhookAttempt{State: WebhookDelivered, CreatedAt: at}
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 5 {
		record(a, i)
	}
	record(b, 10)
	lines, _ := s.WebhookAttempts(a.ID, 0, 100)
	if len(lines) != 3 || !lines[0].CreatedAt.Equal(t0.Add(4*time.Minute)) || !lines[2].CreatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("company A: got %d lines, want its newest 3", len(lines))
	}
	if lines, _ := s.WebhookAttempts(b.ID, 0, 100); len(lines) != 1 {
		t.Fatalf("company B: got %d lines, want 1: another company's writes drop nothing of it", len(lines))
	}
	// Everything older than B's line goes: A's count is recounted to 0, so
	// three new lines fit again before the cap bites.
	if n, err := s.PruneWebhookAttempts(t0.Add(10*time.Minute), 3); err != nil || n != 3 {
		t.Fatalf("got %d pruned (%v), want A's 3", n, err)
	}
	for i := 11; i < 14; i++ {
		record(a, i)
	}
	if lines, _ := s.WebhookAttempts(a.ID, 0, 100); len(lines) != 3 {
		t.Fatalf("after the recount: got %d lines, want 3", len(lines))
	}
	record(a, 14)
	if lines, _ := s.WebhookAttempts(a.ID, 0, 100); len(lines) != 3 || !lines[2].CreatedAt.Equal(t0.Add(12*time.Minute)) {
		t.Fatalf("over the cap again: got %d lines, want the newest 3", len(lines))
	}
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
