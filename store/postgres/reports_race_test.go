package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// deadlocks counts the deadlocks the database broke among a store's
// statements: a tracer on every connection of its pool. A deadlock is run
// again (write), so none reaches a caller; this is how a test sees them.
type deadlocks struct {
	n   atomic.Int64
	mu  sync.Mutex
	sql []string // the statements that met them
}

func (d *deadlocks) note(sql string, err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		d.n.Add(1)
		d.mu.Lock()
		d.sql = append(d.sql, sql+": "+pe.Detail)
		d.mu.Unlock()
	}
}

func (d *deadlocks) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (d *deadlocks) TraceQueryEnd(_ context.Context, _ *pgx.Conn, e pgx.TraceQueryEndData) {
	d.note("", e.Err)
}
func (d *deadlocks) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (d *deadlocks) TraceBatchQuery(_ context.Context, _ *pgx.Conn, e pgx.TraceBatchQueryData) {
	d.note(e.SQL, e.Err)
}
func (d *deadlocks) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestReportBatchesInterleaved: the reports of devices of two companies,
// queued at once so that the workers' batches mix the companies, each
// job's ack, its sent report twice and its outcome (every outcome a status
// event), and reports naming the other company's jobs, while new sends to
// the same devices are made. Afterwards every
// count is exact (the daily counters, the webhook outboxes' counters
// against the deliveries they count), the activity feeds are trimmed, the
// other company's reports failed with ErrNotFound and changed nothing, no
// change failed, and the database broke no deadlock: every batch locks the
// companies' shared rows in one order.
func TestReportBatchesInterleaved(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	s.SetStatusEvents(store.StatusEvents{Build: eventPerEntry(func(n int64, m store.Message) []byte {
		return fmt.Appendf(nil, `{"type":"message.%s","n":%d}`, m.Status, n)
	})})
	const devices, jobs, rounds = 4, 16, 4
	type phone struct {
		companyID, deviceID uint64
		fp                  string
		uuids               []string
	}
	var companies []uint64
	var phones []*phone
	for ci := range 2 {
		c, _ := conformance.Company(t, s)
		companies = append(companies, c.ID)
		statusWebhook(t, s, c.ID, time.Now())
		for d := range devices {
			fp := fmt.Sprintf("fp-%d-%d", ci, d)
			conformance.Device(t, s, c.ID, fp)
			p := &phone{companyID: c.ID, fp: fp}
			for r := range rounds {
				for j := range jobs {
					// Both companies have jobs of these uuids: a report
					// names its company's.
					m := store.Message{UUID: fmt.Sprintf("job-%d-%d-%d", d, r, j), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1",
						Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
					got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					p.deviceID = got.DeviceID
					p.uuids = append(p.uuids, got.UUID)
				}
			}
			phones = append(phones, p)
		}
	}
	// A job of the first company alone, which the second's devices report.
	lone := store.Message{UUID: "first-only", CompanyID: companies[0], Device: "fp-0-0", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi"}
	if _, _, err := s.Enqueue(&lone, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
		t.Fatal(err)
	}

	var foreign []store.Transit
	var mu sync.Mutex
	var wg sync.WaitGroup
	for pi, p := range phones {
		wg.Go(func() {
			var ts []store.Transit
			for r := range rounds {
				now := time.Now()
				round := p.uuids[r*jobs : (r+1)*jobs]
				for _, u := range round {
					ts = append(ts, s.TransitionLater(p.companyID, p.deviceID, u, store.MsgSending, "", "", "", now))
				}
				for _, u := range round {
					ts = append(ts, s.TransitionLater(p.companyID, p.deviceID, u, store.MsgSent, "", "", "", now))
					ts = append(ts, s.TransitionLater(p.companyID, p.deviceID, u, store.MsgSent, "", "", "", now)) // repeated
				}
				for j, u := range round {
					if j%2 == 0 {
						ts = append(ts, s.TransitionLater(p.companyID, p.deviceID, u, store.MsgDelivered, "", "", "", now))
					} else {
						ts = append(ts, s.TransitionLater(p.companyID, p.deviceID, u, store.MsgFailed, "generic_failure", "", "", now))
					}
				}
				// New sends to the device meanwhile: they lock the device's
				// row and add to the company's counters too.
				for j := range 2 {
					m := store.Message{UUID: fmt.Sprintf("new-%d-%d-%d", pi, r, j), CompanyID: p.companyID, Device: p.fp, SIMSlot: "SIM1",
						Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
					if _, _, err := s.Enqueue(&m, store.IdempotencyKey{Key: m.UUID, Route: "/chat/send"}, time.Now, nil,
						func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) }); err != nil {
						t.Errorf("phone %d: a send during the reports: %v", pi, err)
					}
				}
				if p.companyID == companies[1] {
					// The other company's job, named with this company
					// and with the other's.
					f1 := s.TransitionLater(p.companyID, p.deviceID, lone.UUID, store.MsgSent, "", "", "", now)
					f2 := s.TransitionLater(companies[0], p.deviceID, lone.UUID, store.MsgSent, "", "", "", now)
					mu.Lock()
					foreign = append(foreign, f1, f2)
					mu.Unlock()
				}
			}
			for i, tr := range ts {
				if _, _, err := tr.Wait(); err != nil {
					t.Errorf("phone %d, change %d: %v", pi, i, err)
				}
			}
		})
	}
	wg.Wait()
	for i, tr := range foreign {
		if _, moved, err := tr.Wait(); !errors.Is(err, store.ErrNotFound) || moved {
			t.Errorf("report %d of another company's job: moved %v (%v), want ErrNotFound", i, moved, err)
		}
	}
	if m, err := s.MessageByUUID(companies[0], lone.UUID); err != nil || m.Status != store.MsgQueued {
		t.Errorf("the job other companies reported is %s (%v), want queued", m.Status, err)
	}

	ctx := context.Background()
	perCompany := int64(devices * rounds * jobs)
	for _, c := range companies {
		var sent, delivered, failed int64
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(sent), 0)::bigint, coalesce(sum(delivered), 0)::bigint, coalesce(sum(failed), 0)::bigint
			FROM stats_days WHERE company_id = $1`, int64(c)).Scan(&sent, &delivered, &failed); err != nil {
			t.Fatal(err)
		}
		if sent != perCompany || delivered != perCompany/2 || failed != perCompany/2 {
			t.Errorf("company %d counted %d sent, %d delivered, %d failed, want %d, %d, %d", c, sent, delivered, failed, perCompany, perCompany/2, perCompany/2)
		}
		var outboxN, outboxBytes, deliveries, bodies int64
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(deliveries), 0)::bigint, coalesce(sum(bytes), 0)::bigint FROM webhook_outboxes WHERE company_id = $1`,
			int64(c)).Scan(&outboxN, &outboxBytes); err != nil {
			t.Fatal(err)
		}
		if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_deliveries WHERE company_id = $1),
			(SELECT coalesce(sum(length(body)), 0)::bigint FROM webhook_events WHERE company_id = $1)`, int64(c)).Scan(&deliveries, &bodies); err != nil {
			t.Fatal(err)
		}
		if want := 2 * perCompany; deliveries != want || outboxN != want || outboxBytes != bodies {
			t.Errorf("company %d: %d deliveries stored, the outbox counts %d and %d bytes (bodies %d), want %d deliveries counted exactly",
				c, deliveries, outboxN, outboxBytes, bodies, want)
		}
		var activity int64
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM activity WHERE company_id = $1", int64(c)).Scan(&activity); err != nil {
			t.Fatal(err)
		}
		// A trim sees the lines committed before its statement, as a lone
		// report's does (core.go): batches that end together may each
		// leave the others' newest lines, at most a batch's each, for the
		// next report to trim; the feed is read newest first, limited.
		if most := int64(store.ActivityKeep + (reportWorkers-1)*maxReportBatch); activity < store.ActivityKeep || activity > most {
			t.Errorf("company %d keeps %d activity lines, want %d to %d", c, activity, store.ActivityKeep, most)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks among the batches, in %q", n, dl.sql)
	}
}

// TestReportPlanLocksInOrder: a batch's writes list the rows that batches
// share in one order, by key, whatever order its changes came in: every
// multi-row statement of the plan of a batch of many companies' changes
// (the companies' and the devices' ids in their arguments) is sorted. It
// needs no database: it reads the statements the plan queues.
func TestReportPlanLocksInOrder(t *testing.T) {
	p := newReportPlan(&store.StatusEvents{Limits: store.OutboxLimits{LogKeep: 10}})
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var deliveries, attempts int
	for i := range 24 {
		c, dev := uint64(100-i), uint64(1000-i) // later changes, lower ids
		m := store.Message{ID: uint64(i + 1), UUID: fmt.Sprint("m-", i), CompanyID: c, DeviceID: dev, Channel: "sms", SIMSlot: "SIM1",
			Direction: store.Outbound, Status: store.MsgFailed, UpdatedAt: now}
		p.taken[numKey{c, uint64(i)}] = now
		p.noteOutcome(m, store.MsgFailed, "generic_failure", now)
		p.count(m, store.MsgSent, "phone", now)
		p.noteFailure(m, now)
		e := &plannedEvent{m: m, ev: store.WebhookEvent{ID: fmt.Sprint("ev-", i), Body: []byte("{}")}, now: now}
		if i%2 == 0 {
			e.ds, e.res.Queued = []store.WebhookDelivery{{UUID: fmt.Sprint("d-", i), WebhookID: 1}}, 1
			deliveries++
		} else {
			e.refused, e.res.Refused = []store.WebhookAttempt{{CompanyID: c, WebhookID: 1}}, 1
			attempts++
		}
		p.evs = append(p.evs, e)
	}
	ids := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i + 1)
		}
		return out
	}
	b := &pgx.Batch{}
	tx := &txn{sh: -1}
	p.queueNotes(tx, b)
	if err := p.queueEvents(tx, b, ids(deliveries), ids(attempts)); err != nil {
		t.Fatal(err)
	}
	tx.queueCharges(b) // as a batch's write ends
	// The day's storage use is the last row every write locks
	// (txn.chargeStorage, TestChargesLockLast).
	if n := len(b.QueuedQueries); n == 0 || !strings.Contains(b.QueuedQueries[n-1].SQL, "INSERT INTO storage_usage") {
		t.Errorf("the batch's storage use is not its last statement")
	}

	// The statements that lock rows other batches may lock too, and the
	// argument that orders them: the company's or the device's ids.
	ordered := []struct {
		table string
		arg   int
	}{
		{"UPDATE agent_numbers", 1},
		{"INSERT INTO sim_streaks", 0},
		{"INSERT INTO stats_days", 0},
		{"DELETE FROM activity", 0},
		{"DELETE FROM device_failures", 0},
		{"DELETE FROM webhook_attempts", 0},
		{"INSERT INTO storage_usage", 0},
		{"INSERT INTO webhook_outboxes", 0},
	}
	for _, o := range ordered {
		found := false
		for _, q := range b.QueuedQueries {
			if !strings.Contains(q.SQL, o.table) {
				continue
			}
			found = true
			keys, ok := q.Arguments[o.arg].([]int64)
			if !ok || len(keys) < 2 {
				t.Fatalf("%s: argument %d is %T of %d, want the ids of many rows", o.table, o.arg, q.Arguments[o.arg], len(keys))
			}
			if !slices.IsSorted(keys) {
				t.Errorf("%s lists its rows in the order %v, want them sorted: batches would lock them in different orders", o.table, keys)
			}
		}
		if !found {
			t.Errorf("no statement %q queued", o.table)
		}
	}
}

// TestReportBatchRepeatsAndStrangers: one batch holding a job's reports
// twice each, and reports naming the job's uuid with another company (whose
// own job has that uuid) or with another company's device: each repeat
// moves nothing and writes nothing again (one event, one count, one
// activity line a step), each stranger's report fails with ErrNotFound and
// leaves the job as its own reports made it.
func TestReportBatchRepeatsAndStrangers(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	var events atomic.Int64
	s.SetStatusEvents(store.StatusEvents{Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		n := events.Add(1)
		return store.WebhookEvent{ID: fmt.Sprintf("ev-%d", n), Body: []byte("{}")},
			[]store.WebhookDelivery{{UUID: fmt.Sprintf("d-%d", n), EventType: "message." + m.Status, WebhookID: set.Entries[0].ID, NextAttemptAt: m.UpdatedAt}}, nil
	}})
	type side struct {
		c   uint64
		dev uint64
	}
	var sides []side
	for i := range 2 {
		c, _ := conformance.Company(t, s)
		fp := fmt.Sprint("fp-", i)
		conformance.Device(t, s, c.ID, fp)
		if _, err := s.UpdateWebhookSet(c.ID, time.Now(), func(set *store.WebhookSet) error {
			set.Entries = append(set.Entries, store.WebhookEntry{URL: "https://hooks.example/in", Active: true,
				Events: []string{"message.sent", "message.delivered"}})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		m := store.Message{UUID: "job", CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sides = append(sides, side{c.ID, got.DeviceID})
	}
	a, b := sides[0], sides[1]
	ctx := context.Background()
	activityBefore := map[uint64]int64{}
	for _, x := range sides {
		var n int64
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM activity WHERE company_id = $1", int64(x.c)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		activityBefore[x.c] = n // the device's pairing
	}
	now := time.Now()
	var batch []*report
	add := func(companyID, deviceID uint64, status string) *report {
		r := newReport(companyID, deviceID, "job", status, "", "", "", now)
		batch = append(batch, r)
		return r
	}
	var repeats, strangers []*report
	for _, st := range []string{store.MsgSending, store.MsgSent, store.MsgDelivered} {
		add(a.c, a.dev, st)
		repeats = append(repeats, add(a.c, a.dev, st))
		strangers = append(strangers, add(b.c, a.dev, st), add(a.c, b.dev, st))
	}
	s.applyReports(batch)
	for i, r := range repeats {
		if m, moved, err := r.Wait(); err != nil || moved || m.Status != []string{store.MsgSending, store.MsgSent, store.MsgDelivered}[i] {
			t.Errorf("repeat %d: %s moved %v (%v), want no move", i, m.Status, moved, err)
		}
	}
	for i, r := range strangers {
		if _, moved, err := r.Wait(); !errors.Is(err, store.ErrNotFound) || moved {
			t.Errorf("stranger's report %d: moved %v (%v), want ErrNotFound", i, moved, err)
		}
	}
	if m, err := s.MessageByUUID(a.c, "job"); err != nil || m.Status != store.MsgDelivered || m.DeviceID != a.dev {
		t.Errorf("the job is %s on device %d (%v), want delivered on %d", m.Status, m.DeviceID, err, a.dev)
	}
	if m, err := s.MessageByUUID(b.c, "job"); err != nil || m.Status != store.MsgQueued {
		t.Errorf("the other company's job is %s (%v), want queued", m.Status, err)
	}
	for _, c := range []struct {
		side                                       side
		sent, delivered, activity, outbox, evCount int64
	}{{a, 1, 1, 2, 2, 2}, {b, 0, 0, 0, 0, 0}} {
		var sent, delivered, activity, outbox, evs int64
		if err := s.pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(sent), 0)::bigint FROM stats_days WHERE company_id = $1),
			(SELECT coalesce(sum(delivered), 0)::bigint FROM stats_days WHERE company_id = $1),
			(SELECT count(*) FROM activity WHERE company_id = $1),
			(SELECT coalesce(sum(deliveries), 0)::bigint FROM webhook_outboxes WHERE company_id = $1),
			(SELECT count(*) FROM webhook_events WHERE company_id = $1)`, int64(c.side.c)).Scan(&sent, &delivered, &activity, &outbox, &evs); err != nil {
			t.Fatal(err)
		}
		activity -= activityBefore[c.side.c]
		if sent != c.sent || delivered != c.delivered || activity != c.activity || outbox != c.outbox || evs != c.evCount {
			t.Errorf("company %d: %d sent, %d delivered, %d activity lines, %d deliveries pending, %d events; want %d, %d, %d, %d, %d",
				c.side.c, sent, delivered, activity, outbox, evs, c.sent, c.delivered, c.activity, c.outbox, c.evCount)
		}
	}
}
