package postgres

import (
	"fmt"
	"slices"
	"testing"
	"time"

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
