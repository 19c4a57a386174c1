package boltstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// countBucket is the number of keys in a bucket.
func countBucket(t *testing.T, s *Store, name []byte) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(name).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// An event matched by 20 entries stores its body once, not in each
// delivery's row, and the body and its count of deliveries go with the last
// delivery. (What each delivery sends is the conformance suite's.)
func TestWebhookEventStoredOnce(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := webhookFixture(t, s, "a@example.com", 20)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	event := []byte(`{"type":"sms.received","data":{"message":"` + strings.Repeat("x", 40000) + `"}}`)
	err := s.db.Update(func(tx *bolt.Tx) error {
		_, err := s.addWebhookEvent(tx, c.ID, at, OutboxLimits{}, func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
			_, ds, _ := oneDeliveryPerEntry(at)(set)
			return WebhookEvent{ID: "ev-big", Body: event}, ds, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countBucket(t, s, bucketWebhookEvents); n != 1 {
		t.Fatalf("got %d stored event bodies, want 1", n)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWebhookDeliveries).ForEach(func(k, v []byte) error {
			if len(v) > 1000 {
				t.Errorf("delivery row %d is %d bytes: it carries the body", btoi(k), len(v))
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	ids, _, _ := dueIDs(s, at, 100, nil)
	for i, id := range ids {
		if _, err := s.RecordWebhookAttempt(id, 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
			return WebhookAttempt{State: WebhookDelivered, StatusCode: 204, CreatedAt: at}
		}); err != nil {
			t.Fatal(err)
		}
		if left := countBucket(t, s, bucketWebhookEvents); (i < len(ids)-1) != (left == 1) {
			t.Fatalf("after %d of %d deliveries ended: %d event bodies left", i+1, len(ids), left)
		}
	}
	if n := countBucket(t, s, bucketWebhookEventRefs); n != 0 {
		t.Fatalf("after every delivery ended: %d event reference counts left", n)
	}
}

// A store written before events were shared: each pending delivery carries
// its whole body. Opening it moves each event's body into one record, and
// every delivery still sends exactly the bytes it was enqueued with.
func TestMigrateWebhookEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	c, set := webhookFixture(t, s, "a@example.com", 3)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	want := map[uint64]string{}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWebhookDeliveries)
		for ev := range 2 {
			for _, e := range set.Entries {
				id, _ := b.NextSequence()
				uuid := fmt.Sprintf("d-%d-%d", ev, e.ID)
				d := WebhookDelivery{ID: id, UUID: uuid, EventID: fmt.Sprintf("ev-%d", ev), EventType: "sms.received", CompanyID: c.ID, WebhookID: e.ID,
					Body:      []byte(`{"id":"` + uuid + `","type":"sms.received","created_at":"2026-11-22T10:00:00.000Z","data":{"message":"hi \u003c` + fmt.Sprint(ev) + `"}}`),
					CreatedAt: at, NextAttemptAt: at}
				want[id] = string(d.Body)
				if err := putJSON(b, itob(id), d); err != nil {
					return err
				}
				if err := tx.Bucket(bucketWebhookDue).Put(dueKey(d), nil); err != nil {
					return err
				}
			}
		}
		// One row whose body has another shape keeps it.
		id, _ := b.NextSequence()
		d := WebhookDelivery{ID: id, UUID: "odd", EventID: "ev-odd", CompanyID: c.ID, WebhookID: set.Entries[0].ID, Body: []byte(`{"data":1,"id":"odd"}`), CreatedAt: at, NextAttemptAt: at}
		want[id] = string(d.Body)
		if err := putJSON(b, itob(id), d); err != nil {
			return err
		}
		if err := tx.Bucket(bucketWebhookDue).Put(dueKey(d), nil); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(1))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	if v, _ := s.Version(); v != SchemaVersion() {
		t.Fatalf("got schema version %d, want %d", v, SchemaVersion())
	}
	if n := countBucket(t, s, bucketWebhookEvents); n != 2 {
		t.Fatalf("got %d event bodies, want 2", n)
	}
	if d, _, _ := s.WebhookOutboxSize(c.ID); d != 7 {
		t.Fatalf("got %d pending deliveries counted, want 7", d)
	}
	for id, body := range want {
		job, err := s.WebhookJob(id)
		if err != nil || string(job.Delivery.Body) != body {
			t.Fatalf("delivery %d: got body %s (%v), want %s", id, job.Delivery.Body, err, body)
		}
		if _, err := s.RecordWebhookAttempt(id, 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
			return WebhookAttempt{State: WebhookFailed, CreatedAt: at}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if d, b, _ := s.WebhookOutboxSize(c.ID); d != 0 || b != 0 || countBucket(t, s, bucketWebhookEvents) != 0 {
		t.Fatalf("after every delivery ended: %d deliveries, %d bytes, %d events left", d, b, countBucket(t, s, bucketWebhookEvents))
	}
}
