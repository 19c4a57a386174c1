package sms_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// stoppingHub is a hub on which every device but "online" has been
// offline since the start, and which calls stop as it holds the first
// device whose jobs move.
type stoppingHub struct {
	stop func()
	held []string
}

func (h *stoppingHub) Online(fp string, _ uint64) bool     { return fp == "online" }
func (*stoppingHub) OfflineSince(string, uint64) time.Time { return time.Time{} }
func (h *stoppingHub) HoldDevice(fp string, _ uint64, fn func(uint64, bool) error) error {
	h.held = append(h.held, fp)
	h.stop()
	return fn(0, false)
}

// A stop ends the failover sweep between two devices: the sweep went on
// through every offline device of every pool, a transaction each, before
// Run returned.
func TestFailoverStopsBetweenDevices(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	var members []sms.PoolMemberInput
	for _, fp := range []string{"gone-1", "gone-2", "online"} {
		d := store.Device{Fingerprint: fp, CompanyID: c.ID, Name: fp, Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte(fp), CreatedAt: time.Now()}
		if err := st.ProvisionDevices([]store.Device{d}); err != nil {
			t.Fatal(err)
		}
		members = append(members, sms.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
	}
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	ctx, cancel := context.WithCancel(context.Background())
	hub := &stoppingHub{stop: cancel}
	if err := svc.SetFailoverHub(hub); err != nil {
		t.Fatal(err)
	}
	name, after := "fo", int64(60)
	if _, err := svc.CreatePool(context.Background(), c.ID, sms.PoolInput{Name: &name, FailoverAfter: &after, Members: &members}); err != nil {
		t.Fatal(err)
	}
	on := map[string]int{}
	for i := range 6 {
		m, _, err := svc.Send(context.Background(), sms.SendInput{CompanyID: c.ID, Pool: "fo", Phone: fmt.Sprintf("+1555010000%d", i), Message: "hi"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		on[m.Device]++
	}
	if on["gone-1"] != 2 || on["gone-2"] != 2 {
		t.Fatalf("round robin placed %v, want 2 on each member", on)
	}
	clock.Advance(2 * time.Minute)
	moved := svc.FailoverUntil(ctx) // stopped as it holds its first device
	if len(hub.held) != 1 || len(moved) != 2 {
		t.Fatalf("a sweep stopped at its first device held %q and moved %d jobs, want that device's 2 only", hub.held, len(moved))
	}
	hub.stop = func() {}
	if moved := svc.Failover(); len(moved) != 2 {
		t.Fatalf("the next sweep moved %d jobs, want the other device's 2", len(moved))
	}
}

// retriedHub holds a device as a cluster node does: in a database
// transaction of its own (the device's link row, cluster.Gateway), which
// runs fn again when it is retried (a serialization failure, a deadlock)
// and may still fail as it commits. The failover's moves commit in
// transactions of their own, so what any run of fn moved has moved.
type retriedHub struct{}

func (retriedHub) Online(fp string, _ uint64) bool       { return fp == "online" }
func (retriedHub) OfflineSince(string, uint64) time.Time { return time.Time{} }
func (retriedHub) HoldDevice(_ string, _ uint64, fn func(uint64, bool) error) error {
	for range 2 { // the first try's commit failed and was retried
		if err := fn(0, false); err != nil {
			return err
		}
	}
	return errors.New("hold link: commit: connection reset by peer")
}

// Jobs a failover moved while the device's hold was retried, then failed,
// are told and their new device's link woken: the sweep returned only the
// last try's moves (none: the first took them), and none once the hold
// failed, so the moved job waited on its new device, its link not woken,
// until that device's next send.
func TestFailoverTellsWhatMovedUnderAHoldThatFailed(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	var members []sms.PoolMemberInput
	for _, fp := range []string{"gone", "online"} {
		d := store.Device{Fingerprint: fp, CompanyID: c.ID, Name: fp, Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte(fp), CreatedAt: time.Now()}
		if err := st.ProvisionDevices([]store.Device{d}); err != nil {
			t.Fatal(err)
		}
		members = append(members, sms.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
	}
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	if err := svc.SetFailoverHub(retriedHub{}); err != nil {
		t.Fatal(err)
	}
	name, after := "fo", int64(60)
	if _, err := svc.CreatePool(context.Background(), c.ID, sms.PoolInput{Name: &name, FailoverAfter: &after, Members: &members}); err != nil {
		t.Fatal(err)
	}
	var onGone string
	for i := range 2 {
		m, _, err := svc.Send(context.Background(), sms.SendInput{CompanyID: c.ID, Pool: "fo", Phone: fmt.Sprintf("+1555010000%d", i), Message: "hi"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Device == "gone" {
			onGone = m.UUID
		}
	}
	if onGone == "" {
		t.Fatal("round robin placed no job on the offline member")
	}
	o := &order{}
	svc.SetDispatcher(o)
	clock.Advance(2 * time.Minute)
	moved := svc.Failover()
	if len(moved) != 1 || moved[0].UUID != onGone || moved[0].Device != "online" {
		t.Fatalf("the sweep returned %d moved jobs, want the offline member's one, moved to online", len(moved))
	}
	if got := o.take(); !slices.Contains(got, "woke online") {
		t.Fatalf("the job's new device was not woken: %q", got)
	}
}

// faultyStore fails the failover batch it is told to (a store error as the
// batch's transaction commits: nothing of it is written), and counts them.
type faultyStore struct {
	sms.Store
	batches, failAt int
}

func (f *faultyStore) Failover(in store.FailoverInput, check store.DeviceCheck, now time.Time) ([]store.Message, uint64, error) {
	f.batches++
	if f.batches == f.failAt {
		return nil, 0, errors.New("failover: commit: connection reset by peer")
	}
	return f.Store.Failover(in, check, now)
}

// stopHub is onlineHub that, once given a stop, calls it as it holds a
// device (ending the sweep's context).
type stopHub struct {
	onlineHub
	stop func()
}

func (h *stopHub) HoldDevice(fp string, id uint64, fn func(uint64, bool) error) error {
	if h.stop != nil {
		h.stop()
	}
	return h.onlineHub.HoldDevice(fp, id, fn)
}

// An offline device's jobs move in batches, a transaction each: a store
// error, or a stop, between two batches leaves the batches before it
// moved and the rest where they were, and the next sweep moves the rest,
// each job once and in queue order. A sweep moved at most 500 of a
// device's jobs, in one transaction, whatever the backlog.
func TestFailoverMovesInBatches(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	for _, fp := range []string{"gone", "on-1"} {
		d := store.Device{Fingerprint: fp, CompanyID: c.ID, Name: fp, Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte(fp), CreatedAt: time.Now()}
		if err := st.ProvisionDevices([]store.Device{d}); err != nil {
			t.Fatal(err)
		}
	}
	clock := testclock.New(time.Now())
	fs := &faultyStore{Store: st}
	svc := sms.New(sms.Config{}, fs, slog.New(slog.DiscardHandler), clock.Now)
	hub := &stopHub{}
	if err := svc.SetFailoverHub(hub); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name, after := "fo", int64(60)
	members := []sms.PoolMemberInput{{Device: "gone", SIMSlot: "SIM1"}}
	p, err := svc.CreatePool(ctx, c.ID, sms.PoolInput{Name: &name, FailoverAfter: &after, Members: &members})
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 800
	items := make([]sms.BulkItem, jobs)
	for i := range items {
		items[i] = sms.BulkItem{Phone: fmt.Sprintf("+1555020%04d", i), Message: "hi"}
	}
	queued, _, err := svc.SendBulk(ctx, sms.BulkInput{CompanyID: c.ID, Pool: "fo", Messages: items}, nil)
	if err != nil {
		t.Fatal(err)
	}
	members = append(members, sms.PoolMemberInput{Device: "on-1", SIMSlot: "SIM1"})
	if _, err := svc.UpdatePool(ctx, c.ID, p.ID, sms.PoolInput{Members: &members}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)

	var moved []store.Message
	fs.failAt = 2 // the second batch fails
	first := svc.Failover()
	if len(first) != 256 || fs.batches != 2 {
		t.Fatalf("a sweep whose second batch failed moved %d jobs in %d batches, want the first batch's 256", len(first), fs.batches)
	}
	moved = append(moved, first...)
	stopCtx, stop := context.WithCancel(ctx)
	hub.stop = stop // stopped as it holds the device for its first batch
	second := svc.FailoverUntil(stopCtx)
	hub.stop = nil
	if len(second) != 256 {
		t.Fatalf("a sweep stopped in its first batch moved %d jobs, want that batch's 256", len(second))
	}
	moved = append(moved, second...)
	rest := svc.Failover()
	if len(rest) != jobs-512 {
		t.Fatalf("the next sweep moved %d jobs, want the %d left", len(rest), jobs-512)
	}
	moved = append(moved, rest...)
	if again := svc.Failover(); len(again) != 0 {
		t.Fatalf("a sweep after all moved moved %d more", len(again))
	}
	// Each job once, in queue order: the k-th moved is the k-th queued, at
	// a place behind the one before it.
	for i, m := range moved {
		if m.UUID != queued[i].UUID || m.Device != "on-1" || len(m.Attempts) != 1 {
			t.Fatalf("moved %d: %s on %s with %d attempts, want %s (queue order) on on-1, moved once", i, m.UUID, m.Device, len(m.Attempts), queued[i].UUID)
		}
		if i > 0 && m.QueueSeq <= moved[i-1].QueueSeq {
			t.Fatalf("moved %d at place %d, ahead of the one before it (%d)", i, m.QueueSeq, moved[i-1].QueueSeq)
		}
	}
	for _, q := range queued {
		m, err := st.MessageByUUID(c.ID, q.UUID)
		if err != nil || m.Device != "on-1" || m.Status != store.MsgQueued || len(m.Attempts) != 1 {
			t.Fatalf("stored %s: on %s, %s, %d attempts (%v), want queued on on-1, moved once", q.UUID, m.Device, m.Status, len(m.Attempts), err)
		}
	}
}
