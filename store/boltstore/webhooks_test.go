package boltstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
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
	var by DueSkip
	if skip != nil {
		by = store.SkipIf(func(d WebhookDue) bool { return skip(d.ID) })
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
		if _, _, err := s.DueWebhookDeliveries(t0.Add(time.Hour), 64, store.SkipIf(skipAll)); err != nil {
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

// The prune of the deliveries log reads it in transactions of a bounded
// size, each from where the last stopped, so the writes of the group commit
// go between them: old lines and lines beyond keep go in every company, the
// newest keep of their day stay, each company's count is right after it
// (one that drifted too), and a count of a company without lines goes.
// Lines beyond keep are not decoded.
func TestPruneWebhookAttemptsInShortTransactions(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	old := t0.Add(-8 * 24 * time.Hour)
	const keep, batch = 5, 3
	// Each company's lines, oldest first: true for an old one.
	logs := map[uint64][]bool{
		1: {false, false, false, false, false, false, false, false, false, false},
		2: {true, true, true, true, false, false, false},
		3: {true, true, true, true, true},
		4: {false, false, false, false, false, false, false, false, false, false, false, false},
	}
	want := map[uint64][]uint64{} // the ids of the lines each company keeps, oldest first
	lines := 0
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for id := uint64(1); id <= 4; id++ {
			var ids []uint64
			for i, isOld := range logs[id] {
				a := WebhookAttempt{CompanyID: id, WebhookID: 1, EventType: "sms:sent", State: WebhookDelivered, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
				if isOld {
					a.CreatedAt = old
				}
				if err := appendAttempt(tx, &a, 0); err != nil {
					return err
				}
				if !isOld {
					ids = append(ids, a.ID)
				}
				lines++
			}
			want[id] = ids[max(len(ids)-keep, 0):]
		}
		// Company 4's oldest line, beyond keep, is not even JSON: it goes unread.
		if err := tx.Bucket(bucketWebhookAttempts).Put(pair(4, 0), []byte("not json")); err != nil {
			return err
		}
		lines++
		sizes := tx.Bucket(bucketWebhookLogSizes)
		if err := sizes.Put(itob(1), itob(99)); err != nil { // drifted
			return err
		}
		return sizes.Put(itob(9), itob(3)) // no line at all
	}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.pruneWebhookAttempts(t0.Add(-24*time.Hour), keep, batch)
	if err != nil || n != 5+4+5+8 {
		t.Fatalf("prune: dropped %d (%v), want the 22 old lines and lines beyond %d", n, err, keep)
	}
	after, _ := s.Generation()
	if want := uint64((lines + batch - 1) / batch); after-before < want {
		t.Fatalf("the prune of %d lines committed %d transaction(s), want at least %d of at most %d lines each", lines, after-before, want, batch)
	}
	got := map[uint64][]uint64{}
	counts := webhookLog(t, s, func(company, seq uint64, _ []byte) error {
		got[company] = append(got[company], seq)
		return nil
	})
	for id := uint64(1); id <= 4; id++ {
		if fmt.Sprint(got[id]) != fmt.Sprint(want[id]) {
			t.Errorf("company %d keeps lines %v, want %v", id, got[id], want[id])
		}
	}
	if wantCounts := map[uint64]uint64{1: 5, 2: 3, 4: 5}; fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Errorf("the counts after the prune: %v, want %v", counts, wantCounts)
	}
}

// Writes that go between the prune's transactions (new lines, and the
// oldest dropped beyond keep) leave each company's count right and no old
// line behind, wherever the prune stopped.
func TestPruneWebhookAttemptsBesideWrites(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	const keep = 6
	write := func(company uint64, at time.Time) error {
		return s.update(func(tx *bolt.Tx) error {
			a := WebhookAttempt{CompanyID: company, WebhookID: 1, EventType: "sms:sent", State: WebhookDelivered, CreatedAt: at}
			return appendAttempt(tx, &a, keep)
		})
	}
	for i := range 40 { // old lines, some beyond keep
		if err := write(uint64(i%4+1), t0.Add(-48*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			if err := write(uint64(i%5+1), t0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 20 {
		if _, err := s.pruneWebhookAttempts(t0.Add(-24*time.Hour), keep, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.pruneWebhookAttempts(t0.Add(-24*time.Hour), keep, 2); err != nil {
		t.Fatal(err)
	}
	lines := map[uint64]uint64{}
	counts := webhookLog(t, s, func(company, _ uint64, v []byte) error {
		var a WebhookAttempt
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		if !a.CreatedAt.Equal(t0) {
			t.Errorf("an old line of company %d outlived the prune", a.CompanyID)
		}
		lines[company]++
		return nil
	})
	if fmt.Sprint(lines) != fmt.Sprint(counts) {
		t.Fatalf("lines by company %v, counted %v", lines, counts)
	}
	for id, n := range lines {
		if n > keep {
			t.Errorf("company %d keeps %d lines, want at most %d", id, n, keep)
		}
	}
}

// webhookLog calls line with each line of the webhook deliveries log (its
// company, its sequence and its record) and answers the log's count of
// lines by company, read in one transaction.
func webhookLog(t *testing.T, s *Store, line func(company, seq uint64, v []byte) error) map[uint64]uint64 {
	t.Helper()
	counts := map[uint64]uint64{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketWebhookAttempts).ForEach(func(k, v []byte) error {
			return line(btoi(k[:8]), btoi(k[8:]), v)
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketWebhookLogSizes).ForEach(func(k, v []byte) error {
			counts[btoi(k)] = btoi(v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return counts
}
