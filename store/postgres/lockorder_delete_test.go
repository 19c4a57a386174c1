package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestDeviceDeletionLocksAfterItsJobs: a release of due jobs of devices E
// and D (ids rising) beside the deletion of D. The release has locked both
// jobs and waits for E, held by another transaction; the deletion then
// starts. Locking D first and its jobs after, the deletion would hold D
// and wait for D's job, which the release holds while it waits for D once
// it has E, and the database would break the deadlock; locking D's jobs
// first, as every writer that takes jobs and devices does, the deletion
// waits behind the release and the database breaks none.
func TestDeviceDeletionLocksAfterItsJobs(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	url := migrated(t)
	s, other := openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}) // two nodes
	c, _ := conformance.Company(t, s)
	fps := devicesOf(t, s, c.ID, 2) // E, D
	var jobs []store.Message
	for i, fp := range fps {
		m := store.Message{UUID: fmt.Sprintf("due-%d", i), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms",
			Phone: "+15550100000", Text: "hi", SendAt: conformance.T0.Add(time.Minute)}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, got)
	}
	if jobs[0].DeviceID >= jobs[1].DeviceID {
		t.Fatalf("device ids %d, %d: want E's below D's", jobs[0].DeviceID, jobs[1].DeviceID)
	}
	now := conformance.T0.Add(time.Hour)
	var released []store.Message
	var relErr, delErr error
	raceBehindLock(t, s, lockDevice, jobs[0].DeviceID,
		func() { released, relErr = s.ReleaseDue(now, 10) },
		func() { _, delErr = other.DeleteDevice(c.ID, fps[1], now) })
	if relErr != nil || len(released) != 2 {
		t.Fatalf("the release moved %d jobs (%v), want both", len(released), relErr)
	}
	if delErr != nil {
		t.Fatalf("delete device: %v", delErr)
	}
	for i, want := range []string{store.MsgQueued, store.MsgFailed} {
		m, err := s.MessageByUUID(c.ID, jobs[i].UUID)
		if err != nil || m.Status != want {
			t.Errorf("job %d: %s %s (%v), want %s", i, m.Status, m.Error, err, want)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the release and the deletion, in %q", n, dl.sql)
	}
}

// TestDeviceDeletionLocksPoolsFirst: the deletion of device D (a member of
// pool P with E, ids rising E, D) beside an edit of P's members and a send
// through P (its second, D's turn). The send holds D's member row and
// waits for D, held by another transaction; the edit has locked P's row
// and waits for the member's row (a new order of members starts the turns
// afresh); then the deletion starts. Locking D first and P's row after (to
// take D out of it), the deletion would hold D and wait for the edit,
// which waits for the send, which waits for D, and the database would
// break the deadlock; locking the pools it leaves before the device, the
// deletion waits holding no device and the database breaks none.
func TestDeviceDeletionLocksPoolsFirst(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	url := migrated(t)
	s, other, third := openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}) // three nodes
	c, _ := conformance.Company(t, s)
	e, d := conformance.Device(t, s, c.ID, "leave-e"), conformance.Device(t, s, c.ID, "leave-d")
	if e.ID >= d.ID {
		t.Fatalf("device ids %d, %d: want E's below D's", e.ID, d.ID)
	}
	members := []store.PoolMemberInput{{Device: "leave-e", SIMSlot: "SIM1"}, {Device: "leave-d", SIMSlot: "SIM1"}}
	p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "leave", Strategy: store.PoolRoundRobin, Members: members}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	now := conformance.T0.Add(time.Hour)
	send := func(uuid string) (store.Message, error) {
		m := store.Message{UUID: uuid, CompanyID: c.ID, Pool: "leave", Channel: "sms", Phone: "+15550100000", Text: "hi"}
		out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return now }, nil, nil)
		return out, err
	}
	if m, err := send("first"); err != nil || m.Device != "leave-e" {
		t.Fatalf("first send through the pool: %s (%v), want it on leave-e", m.Device, err)
	}
	var sent store.Message
	var sendErr, editErr, delErr error
	raceBehindLock(t, s, lockDevice, d.ID,
		func() { sent, sendErr = send("second") },
		func() {
			_, editErr = other.PutPool(c.ID, p.ID, now, func(cur store.Pool) (store.PoolInput, error) {
				in := cur.Input()
				slices.Reverse(in.Members)
				return in, nil
			})
		},
		func() { _, delErr = third.DeleteDevice(c.ID, "leave-d", now) })
	if sendErr != nil || sent.Device != "leave-d" {
		t.Errorf("the second send through the pool: %s (%v), want it on leave-d, the pool's turn", sent.Device, sendErr)
	}
	if editErr != nil || delErr != nil {
		t.Fatalf("edit of the pool: %v; deletion of D: %v", editErr, delErr)
	}
	if got, err := s.Pool(c.ID, p.ID); err != nil || len(got.Members) != 1 || got.Members[0].Device != "leave-e" {
		t.Errorf("the pool after the deletion: %+v (%v), want leave-e alone", got.Members, err)
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the deletion, the edit and the send, in %q", n, dl.sql)
	}
}

// TestDeviceDeletionWritesInBatchOrder: the last transaction of a
// device's deletion fails a job that came back to the device's queue after
// its batches (failDeviceBatch) had failed it, writing its count and
// status event and the deletion's activity line, while a batch of
// reports of another device of the company writes its own count, line and
// status event. The deletion wrote its jobs' counts and events first and
// its line last, the batch its line before its event: each held what the
// other waited for (the feed's oldest line, the outbox's row), and the
// database broke the deadlock. The deletion now writes them in the
// batch's order.
func TestDeviceDeletionWritesInBatchOrder(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	// Two transactions of the test hold rows while two writers and the
	// test's watch use the pool: more than its default size.
	s := openURL(t, migrated(t)+"&pool_max_conns=8", Options{Tracer: dl})
	s.pickShard = func() int16 { return 0 } // the shard both write to, as one time in shards at random
	s.SetStatusEvents(store.StatusEvents{Build: eventPerEntry(nil)})
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	statusWebhook(t, s, c.ID, time.Now())
	var jobs []store.Message
	for _, fp := range []string{"kept", "gone"} {
		conformance.Device(t, s, c.ID, fp)
		m := store.Message{UUID: "job-" + fp, CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, got)
	}
	kept, gone := jobs[0], jobs[1]
	if _, _, err := s.Transition(c.ID, kept.DeviceID, kept.UUID, store.MsgSending, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO activity (company_id, rec) SELECT $1, '{}'::jsonb FROM generate_series(1, $2)`,
		int64(c.ID), store.ActivityKeep+10); err != nil {
		t.Fatal(err)
	}
	// The feed's oldest line, held: the batch waits for it first.
	feed, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Rollback(ctx) //nolint:errcheck // released below
	if _, err := feed.Exec(ctx, "SELECT 1 FROM activity WHERE company_id = $1 ORDER BY seq LIMIT 1 FOR UPDATE", int64(c.ID)); err != nil {
		t.Fatal(err)
	}
	// The deleted device's row, held while its failed job is put back in
	// its queue: the deletion's batches fail it, its last transaction
	// waits for the device and then finds the job queued again.
	dev, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := dev.Exec(ctx, lockDevice, int64(gone.DeviceID)); err != nil {
		t.Fatal(err)
	}
	var delErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, delErr = s.DeleteDevice(c.ID, "gone", time.Now()) })
	// The deletion's batch commits the failed job (before the report
	// starts: the report holds rows its batch writes too, while it waits
	// for the feed); then its last transaction waits for the device.
	poll.Until(t, "the deletion's batch failing the job", func() bool {
		m, err := s.MessageByUUID(c.ID, gone.UUID)
		return err == nil && m.Status == store.MsgFailed
	})
	waitLocks(t, s, 1) // the deletion's last transaction waits for the device
	r := newReport(c.ID, kept.DeviceID, kept.UUID, store.MsgSent, "", "", "", time.Now())
	wg.Go(func() { s.applyReports([]*report{r}) })
	waitLocks(t, s, 2) // the report waits for the feed's oldest line
	raw, err := rec(gone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Exec(ctx, "UPDATE messages SET status = 'queued', queue_place = $2, rec = $3 WHERE id = $1",
		int64(gone.ID), int64(gone.QueueSeq), raw); err != nil {
		t.Fatal(err)
	}
	if err := dev.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitLocks(t, s, 2) // the deletion waits for the feed's oldest line too
	if err := feed.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if m, moved, err := r.Wait(); err != nil || !moved || m.Status != store.MsgSent {
		t.Errorf("the report moved the job to %s (moved %v, %v), want sent", m.Status, moved, err)
	}
	if delErr != nil {
		t.Errorf("the deletion: %v", delErr)
	}
	if m, err := s.MessageByUUID(c.ID, gone.UUID); err != nil || m.Status != store.MsgFailed {
		t.Errorf("the deleted device's job is %s (%v), want failed", m.Status, err)
	}
	var lines int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM activity WHERE company_id = $1 AND rec->>'type' = $2`,
		int64(c.ID), store.ActDeviceDeleted).Scan(&lines); err != nil || lines != 1 {
		t.Errorf("the feed has %d lines of the deletion (%v), want 1", lines, err)
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks, in %q", n, dl.sql)
	}
}
