package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestReportsShareTransactions: a phone's reports queued one after another
// (acks, then sent reports, an unknown job among them) apply in their
// order, each with its own outcome, in far fewer transactions than
// changes; after Close a report fails with ErrClosed.
func TestReportsShareTransactions(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "fp")
	const jobs = 20
	msgs := make([]store.Message, jobs)
	for i := range msgs {
		m := store.Message{UUID: fmt.Sprintf("job-%d", i), CompanyID: c.ID, Device: "fp", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi"}
		var err error
		if msgs[i], _, err = s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	dev, now := msgs[0].DeviceID, time.Now()
	// The first job's row locked elsewhere holds the worker in its first
	// transaction while the rest queue, however slow this goroutine is.
	hold, err := s.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.Background()) //nolint:errcheck // released below
	if _, err := hold.Exec(context.Background(), "SELECT 1 FROM messages WHERE company_id = $1 AND uuid = $2 FOR UPDATE", int64(c.ID), msgs[0].UUID); err != nil {
		t.Fatal(err)
	}
	before := counted.commits.Load()
	var acks, sents []store.Transit
	for i, m := range msgs {
		acks = append(acks, s.TransitionLater(c.ID, dev, m.UUID, store.MsgSending, "", "", "", now))
		if i == jobs/2 {
			acks = append(acks, s.TransitionLater(c.ID, dev, "no-such-job", store.MsgSending, "", "", "", now))
		}
	}
	for _, m := range msgs {
		sents = append(sents, s.TransitionLater(c.ID, dev, m.UUID, store.MsgSent, "", "", "", now))
	}
	if err := hold.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, tr := range acks {
		m, moved, err := tr.Wait()
		if i == jobs/2+1 {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the unknown job's ack: %v, want ErrNotFound", err)
			}
			continue
		}
		if err != nil || !moved || m.Status != store.MsgSending {
			t.Errorf("ack %d: %s moved %v (%v), want sending and moved", i, m.Status, moved, err)
		}
	}
	for i, tr := range sents {
		if m, moved, err := tr.Wait(); err != nil || !moved || m.Status != store.MsgSent {
			t.Errorf("sent report %d: %s moved %v (%v), want sent and moved", i, m.Status, moved, err)
		}
	}
	changes := int64(len(acks) + len(sents))
	if n := counted.commits.Load() - before; n >= changes/2 {
		t.Errorf("%d changes took %d transactions, want them to share", changes, n)
	}
	for _, m := range msgs {
		if got, err := s.MessageByUUID(c.ID, m.UUID); err != nil || got.Status != store.MsgSent {
			t.Errorf("%s is %s (%v) after its reports, want sent", m.UUID, got.Status, err)
		}
	}

	s.Close()
	if _, _, err := s.TransitionLater(c.ID, dev, msgs[0].UUID, store.MsgDelivered, "", "", "", now).Wait(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("a report after Close: %v, want ErrClosed", err)
	}
}

// TestReportBatchCost: what a batch of reports costs the database does not
// grow with the batch: 12 changes and 60 (each job's ack, its sent report,
// then delivered or failed with a carrier error; a webhook that wants every
// outcome, so each outcome writes an event) take as many statements and
// round trips as each other: 18 in 4, BEGIN going with the reads.
func TestReportBatchCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	s.SetStatusEvents(store.StatusEvents{Build: eventPerEntry(func(_ int64, m store.Message) []byte {
		return []byte(`{"type":"message.` + m.Status + `"}`)
	})})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "fp")
	statusWebhook(t, s, c.ID, time.Now())
	cost := func(jobs int) (stmts, trips int64) {
		t.Helper()
		var dev uint64
		var uuids []string
		for i := range jobs {
			m := store.Message{UUID: fmt.Sprintf("job-%d-%d", jobs, i), CompanyID: c.ID, Device: "fp", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi"}
			got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			dev = got.DeviceID
			uuids = append(uuids, got.UUID)
		}
		now := time.Now()
		var batch []*report
		add := func(uuid, status, errText string) {
			batch = append(batch, &report{companyID: c.ID, deviceID: dev, uuid: uuid, status: status, errText: errText, now: now, done: make(chan struct{})})
		}
		for _, u := range uuids {
			add(u, store.MsgSending, "")
		}
		for _, u := range uuids {
			add(u, store.MsgSent, "")
		}
		for i, u := range uuids {
			if i%2 == 0 {
				add(u, store.MsgDelivered, "")
			} else {
				add(u, store.MsgFailed, "generic_failure")
			}
		}
		n0, t0 := counted.n.Load(), counted.trips.Load()
		s.applyReports(batch)
		stmts, trips = counted.n.Load()-n0, counted.trips.Load()-t0
		for i, r := range batch {
			if _, moved, err := r.Wait(); err != nil || !moved {
				t.Fatalf("change %d of %d (%s to %s): moved %v (%v), want moved", i, len(batch), r.uuid, r.status, moved, err)
			}
		}
		return stmts, trips
	}
	small, smallTrips := cost(4)
	large, largeTrips := cost(20)
	t.Logf("12 changes: %d statements, %d round trips; 60 changes: %d statements, %d round trips", small, smallTrips, large, largeTrips)
	// BEGIN goes with the reads (txn.go): reads, delivery ids, writes, COMMIT.
	if small > 18 || smallTrips > 4 {
		t.Errorf("12 changes cost %d statements in %d round trips, want at most 18 in 4", small, smallTrips)
	}
	if large > small || largeTrips > smallTrips {
		t.Errorf("60 changes cost %d statements in %d round trips, 12 cost %d in %d: want no more for more changes",
			large, largeTrips, small, smallTrips)
	}
}

// statusWebhook gives the company a webhook that wants every outcome of a
// send (sent, delivered, failed), so that its changes make status events.
func statusWebhook(t *testing.T, s *Store, companyID uint64, at time.Time) {
	t.Helper()
	if _, err := s.UpdateWebhookSet(companyID, at, func(set *store.WebhookSet) error {
		set.Entries = append(set.Entries, store.WebhookEntry{URL: "https://hooks.example/in", Active: true,
			Events: []string{"message.sent", "message.delivered", "message.failed"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// eventPerEntry is a status-event builder for tests: events numbered in
// the order built (ev-N), with body's bytes (nil: {}), and a delivery for
// each entry of the company's set (d-N-entry).
func eventPerEntry(body func(n int64, m store.Message) []byte) func(store.WebhookSet, store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
	var seq atomic.Int64
	return func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		n := seq.Add(1)
		ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", n), Body: []byte(`{}`)}
		if body != nil {
			ev.Body = body(n, m)
		}
		var ds []store.WebhookDelivery
		for _, e := range set.Entries {
			ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d-%d", n, e.ID), EventType: "message." + m.Status,
				WebhookID: e.ID, CreatedAt: m.UpdatedAt, NextAttemptAt: m.UpdatedAt})
		}
		return ev, ds, nil
	}
}
