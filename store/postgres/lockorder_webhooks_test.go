package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestAttemptLogsBeforeTheOutbox: an attempt that ends a delivery meets a
// batch of reports whose first status event fills the company's outbox
// and whose second is refused (a failed line in the deliveries log). The
// batch writes the log's line and trims the log before it adds to the
// outbox; the attempt took its delivery off the outbox before it wrote
// its line: in one shard each held what the other waited for (the
// outbox's row, the log's oldest line), and the database broke the
// deadlock. The attempt now writes its line first. (Trims now pass over
// lines another transaction holds, so the two may not wait for the held
// line at all; the test holds them to no deadlock and exact counts either
// way.)
func TestAttemptLogsBeforeTheOutbox(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	s.pickShard = func() int16 { return 0 } // the shard both write to, as one time in shards at random
	const keep = 5
	s.SetStatusEvents(store.StatusEvents{Limits: store.OutboxLimits{MaxDeliveries: 2, LogKeep: keep}, Build: eventPerEntry(nil)})
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	statusWebhook(t, s, c.ID, time.Now())
	d := conformance.Device(t, s, c.ID, "phone")
	var jobs []store.Message
	for i := range 3 {
		m := store.Message{UUID: fmt.Sprint("job-", i), CompanyID: c.ID, Device: "phone", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Transition(c.ID, d.ID, got.UUID, store.MsgSending, "", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, got)
	}
	// The first job's event: one delivery pending of the outbox's two.
	if _, _, err := s.Transition(c.ID, d.ID, jobs[0].UUID, store.MsgSent, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	var delivery int64
	if err := s.pool.QueryRow(ctx, "SELECT id FROM webhook_deliveries WHERE company_id = $1", int64(c.ID)).Scan(&delivery); err != nil {
		t.Fatal(err)
	}
	// A full log, so that every line written trims its oldest.
	if _, err := s.pool.Exec(ctx, `INSERT INTO webhook_attempts (id, company_id, webhook_id, created_at, rec)
		SELECT nextval(pg_get_serial_sequence('webhook_attempts', 'id')), $1, 0, now(), '{}'::jsonb FROM generate_series(1, $2)`,
		int64(c.ID), keep+5); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	batch := []*report{newReport(c.ID, d.ID, jobs[1].UUID, store.MsgSent, "", "", "", now), newReport(c.ID, d.ID, jobs[2].UUID, store.MsgSent, "", "", "", now)}
	var attemptErr error
	raceBehindOrPast(t, s, "SELECT 1 FROM webhook_attempts WHERE company_id = $1 ORDER BY id LIMIT 1 FOR UPDATE", c.ID,
		func() { s.applyReports(batch) },
		func() {
			_, attemptErr = s.RecordWebhookAttempt(uint64(delivery), keep, func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt {
				return store.WebhookAttempt{State: store.WebhookDelivered, StatusCode: 200, CreatedAt: time.Now()}
			})
		})
	for i, r := range batch {
		if m, moved, err := r.Wait(); err != nil || !moved || m.Status != store.MsgSent {
			t.Errorf("report %d moved its job to %s (moved %v, %v), want sent", i, m.Status, moved, err)
		}
	}
	if attemptErr != nil {
		t.Errorf("the attempt: %v", attemptErr)
	}
	var pending, stored int64
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(deliveries), 0)::bigint FROM webhook_outboxes WHERE company_id = $1),
		(SELECT count(*) FROM webhook_deliveries WHERE company_id = $1)`, int64(c.ID)).Scan(&pending, &stored); err != nil {
		t.Fatal(err)
	}
	if pending != stored {
		t.Errorf("the outbox counts %d deliveries, %d are stored", pending, stored)
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks, in %q", n, dl.sql)
	}
}
