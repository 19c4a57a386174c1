package boltstore

import (
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// TestMigrateV11IndexesDueDeliveriesByEntry: the migration to schema 11
// indexes a store's pending deliveries by company and entry, those whose
// due key was written without their entry and company included, so that
// a pass finds every one of them in due order and passes over a full
// company; attempts after it keep the index.
func TestMigrateV11IndexesDueDeliveriesByEntry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	a, _ := webhookFixture(t, s, "a@example.com", 2)
	b, _ := webhookFixture(t, s, "b@example.com", 1)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.update(func(tx *bolt.Tx) error {
		for i, c := range []uint64{a.ID, b.ID, a.ID} {
			if _, err := addDeliveries(s, tx, c, t0.Add(time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want, _, err := dueIDs(s, t0.Add(time.Hour), 100, nil)
	if err != nil || len(want) != 5 {
		t.Fatalf("before the migration: %v (%v), want 5 due", want, err)
	}
	// Back to schema 10: no index by entry, and one due key without its
	// entry and company, as written before they were kept there.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketWebhookDueEntries); err != nil {
			return err
		}
		due := tx.Bucket(bucketWebhookDue)
		k, _ := due.Cursor().First()
		if err := due.Put(slices.Clone(k), nil); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(10))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if v, err := s.Version(); err != nil || v != SchemaVersion() || v < 11 {
		t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
	}
	if got, next, err := dueIDs(s, t0.Add(time.Hour), 100, nil); err != nil || !slices.Equal(got, want) || !next.IsZero() {
		t.Fatalf("after the migration: %v, next %v (%v); want %v", got, next, err, want)
	}
	asked := 0
	due, _, err := s.DueWebhookDeliveries(t0.Add(time.Hour), 100, func(d WebhookDue) store.DueVerdict {
		asked++
		if d.CompanyID == a.ID {
			return store.DuePassCompany
		}
		return store.DueTake
	})
	if err != nil || len(due) != 1 || due[0].CompanyID != b.ID || asked != 2 {
		t.Fatalf("a's company full: %+v after %d asked (%v), want b's one after asking of a's first", due, asked, err)
	}
	// A retry moves a delivery in the index; an end removes it.
	if _, err := s.RecordWebhookAttempt(want[0], 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
		return WebhookAttempt{State: WebhookPending, CreatedAt: t0, NextAttemptAt: t0.Add(2 * time.Hour)}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordWebhookAttempt(want[1], 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
		return WebhookAttempt{State: WebhookFailed, CreatedAt: t0}
	}); err != nil {
		t.Fatal(err)
	}
	if got, next, err := dueIDs(s, t0.Add(time.Hour), 100, nil); err != nil || !slices.Equal(got, want[2:]) || !next.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("after a retry and an end: %v, next %v (%v); want %v, then the retry", got, next, err, want[2:])
	}
	if got, _, err := dueIDs(s, t0.Add(3*time.Hour), 100, nil); err != nil || !slices.Equal(got, append(slices.Clone(want[2:]), want[0])) {
		t.Fatalf("once the retry is due: %v (%v), want %v then %d", got, err, want[2:], want[0])
	}
	if n := countBucket(t, s, bucketWebhookDueEntries); n != 4 {
		t.Fatalf("%d keys in the index by entry, want the 4 pending", n)
	}
}
