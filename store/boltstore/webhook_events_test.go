package boltstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestDeliveryBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ event, want string }{
		{`{"type":"sms.received","data":{"a":1}}`, `{"id":"d-1","type":"sms.received","data":{"a":1}}`},
		{`{}`, `{"id":"d-1"}`},
		{` { } `, `{"id":"d-1" }`},
	} {
		if got := string(DeliveryBody("d-1", []byte(tc.event))); got != tc.want {
			t.Errorf("DeliveryBody(%s): got %s, want %s", tc.event, got, tc.want)
		}
	}
}

// countBucket is the number of keys in a bucket.
func countBucket(t *testing.T, s *Store, name []byte) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(name).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// An event matched by 20 entries stores its body once; each delivery reads
// it with its own id in front, and the body goes with the last delivery.
func TestWebhookEventStoredOnce(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := webhookFixture(t, s, "a@example.com", 20)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	big := strings.Repeat("x", 40000)
	event := []byte(`{"type":"sms.received","data":{"message":"` + big + `"}}`)
	err := s.db.Update(func(tx *bolt.Tx) error {
		res, err := s.addWebhookEvent(tx, c.ID, at, OutboxLimits{}, func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
			_, ds, _ := oneDeliveryPerEntry(at)(set)
			return WebhookEvent{ID: "ev-big", Body: event}, ds, nil
		})
		if res.Queued != 20 {
			t.Errorf("got %d queued, want 20", res.Queued)
		}
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
	if d, b, _ := s.WebhookOutboxSize(c.ID); d != 20 || b != int64(len(event)) {
		t.Fatalf("outbox size: got %d deliveries, %d bytes; want 20, %d", d, b, len(event))
	}
	ids, _, _ := dueIDs(s, at, 100, nil)
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
		if err := json.Unmarshal(job.Delivery.Body, &got); err != nil || got.ID != job.Delivery.UUID || got.Data.Message != big {
			t.Fatalf("delivery %d: got id %q, %d characters (%v); want its own id and the whole text", id, got.ID, len(got.Data.Message), err)
		}
		if _, err := s.RecordWebhookAttempt(id, 0, func(WebhookDelivery, *WebhookEntry) WebhookAttempt {
			return WebhookAttempt{State: WebhookDelivered, StatusCode: 204, CreatedAt: at}
		}); err != nil {
			t.Fatal(err)
		}
		if left := countBucket(t, s, bucketWebhookEvents); (i < len(ids)-1) != (left == 1) {
			t.Fatalf("after %d of %d deliveries ended: %d event bodies left", i+1, len(ids), left)
		}
	}
	if d, b, _ := s.WebhookOutboxSize(c.ID); d != 0 || b != 0 || countBucket(t, s, bucketWebhookEventRefs) != 0 {
		t.Fatalf("after every delivery ended: outbox %d deliveries, %d bytes; want nothing left", d, b)
	}
}

// At the bound the event is queued; one delivery more and its deliveries
// are failed lines of the log, with nothing stored for them.
func TestWebhookOutboxBound(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := webhookFixture(t, s, "a@example.com", 2)
	other, _ := webhookFixture(t, s, "b@example.com", 2)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	lim := OutboxLimits{MaxDeliveries: 4, LogKeep: 100}
	add := func(company uint64, i int) OutboxAdd {
		t.Helper()
		var res OutboxAdd
		if err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			res, err = s.addWebhookEvent(tx, company, at, lim, oneDeliveryPerEntry(at.Add(time.Duration(i))))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := add(c.ID, 1); res.Queued != 2 || res.Pending != 2 {
		t.Fatalf("first event: got %+v, want 2 queued", res)
	}
	if res := add(c.ID, 2); res.Queued != 2 || res.Pending != 4 {
		t.Fatalf("second event (exactly at the bound): got %+v, want 2 queued, 4 pending", res)
	}
	res := add(c.ID, 3)
	if res.Queued != 0 || res.Refused != 2 || res.Pending != 4 {
		t.Fatalf("third event: got %+v, want 2 refused and 4 still pending", res)
	}
	lines, _ := s.WebhookAttempts(c.ID, 0, 10)
	if len(lines) != 2 || lines[0].State != WebhookFailed || !strings.Contains(lines[0].Error, "outbox is full") || lines[0].Attempt != 0 {
		t.Fatalf("got log %+v, want two failed lines saying the outbox is full", lines)
	}
	if n := countBucket(t, s, bucketWebhookEvents); n != 2 {
		t.Fatalf("got %d event bodies, want 2 (the refused event stores none)", n)
	}
	// Another company's outbox is its own.
	if res := add(other.ID, 4); res.Queued != 2 {
		t.Fatalf("another company: got %+v, want 2 queued", res)
	}
	// By bytes: the body of one event fits, a second one does not.
	lim = OutboxLimits{MaxBytes: int64(len(`{"type":"sms.received"}`)) * 3}
	if res := add(other.ID, 5); res.Queued != 2 {
		t.Fatalf("second event within the byte bound: got %+v", res)
	}
	if res := add(other.ID, 6); res.Queued != 2 {
		t.Fatalf("third event exactly at the byte bound: got %+v", res)
	}
	if res := add(other.ID, 7); res.Refused != 2 {
		t.Fatalf("fourth event over the byte bound: got %+v, want refused", res)
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
