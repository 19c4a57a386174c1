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
