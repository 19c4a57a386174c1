package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestFailoverGoesOnPastAJobTakenMeanwhile: a job of a failover batch that
// a cancel takes between the batch's read of the device's queue and its
// lock of the jobs is passed over, and the batch still says where the
// next one goes on from: the place of the last job it looked at, not 0
// (no more), which ended the device's sweep there and left the jobs past
// it for the next sweep.
func TestFailoverGoesOnPastAJobTakenMeanwhile(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	from := conformance.Device(t, s, c.ID, "fgo-from")
	to := conformance.Device(t, s, c.ID, "fgo-to")
	only := []store.PoolMemberInput{{Device: from.Fingerprint, SIMSlot: "SIM1"}}
	p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "fgo", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: only}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]store.Message, 5)
	for i := range ms {
		ms[i] = store.Message{UUID: fmt.Sprintf("fgo-%d", i), CompanyID: c.ID, Pool: "fgo", SIMSlot: "SIM1", Channel: "sms",
			Phone: fmt.Sprintf("+155507000%02d", i), Text: "hello"}
	}
	if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
		t.Fatal(err)
	}
	queued := make([]store.Message, len(ms))
	for i := range ms {
		if queued[i], err = s.MessageByUUID(c.ID, ms[i].UUID); err != nil || queued[i].DeviceID != from.ID {
			t.Fatalf("job %d: %+v (%v), want it queued on %s", i, queued[i], err, from.Fingerprint)
		}
		if i > 0 && queued[i].QueueSeq <= queued[i-1].QueueSeq {
			t.Fatalf("job %d at place %d, behind job %d's %d", i, queued[i].QueueSeq, i-1, queued[i-1].QueueSeq)
		}
	}
	both := append(only, store.PoolMemberInput{Device: to.Fingerprint, SIMSlot: "SIM1"})
	if _, err := s.PutPool(c.ID, p.ID, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "fgo", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: both}, nil
	}); err != nil {
		t.Fatal(err)
	}
	at := conformance.T0.Add(2 * time.Minute)
	in := store.FailoverInput{CompanyID: c.ID, DeviceID: from.ID, Reason: store.FailoverOffline, Pools: map[uint64]bool{p.ID: true}, Limit: 3}
	// The cancel of the second job waits first behind a lock of its row,
	// then the batch, which has read the queue by then: the cancel goes
	// first once the row is let go, and the batch finds the job canceled.
	var moved []store.Message
	var next uint64
	var cancelErr, failoverErr error
	raceBehindLock(t, s, "SELECT 1 FROM messages WHERE id = $1 FOR UPDATE", queued[1].ID,
		func() { _, cancelErr = s.Cancel(c.ID, queued[1].UUID, at) },
		func() { moved, next, failoverErr = s.Failover(in, nil, at) })
	if cancelErr != nil || failoverErr != nil {
		t.Fatalf("cancel: %v; failover: %v", cancelErr, failoverErr)
	}
	if m, err := s.MessageByUUID(c.ID, queued[1].UUID); err != nil || m.Status != store.MsgCanceled || m.DeviceID != from.ID {
		t.Fatalf("the canceled job: %+v (%v), want it canceled where it was", m, err)
	}
	if len(moved) != 2 || moved[0].UUID != queued[0].UUID || moved[1].UUID != queued[2].UUID {
		t.Fatalf("the batch moved %d jobs (%v), want the first and the third", len(moved), uuids(moved))
	}
	if next != queued[2].QueueSeq {
		t.Fatalf("the batch of 3 that lost a job to a cancel says the next goes on from %d, want %d (the third job's place)", next, queued[2].QueueSeq)
	}
	in.After = next
	rest, next, err := s.Failover(in, nil, at)
	if err != nil || len(rest) != 2 || rest[0].UUID != queued[3].UUID || rest[1].UUID != queued[4].UUID || next != 0 {
		t.Fatalf("the next batch: %v moved (%v), next from %d; want the last two and no more", uuids(rest), err, next)
	}
	for _, m := range append(moved, rest...) {
		if m.DeviceID != to.ID || len(m.Attempts) != 1 {
			t.Fatalf("moved %s: on device %d with %d attempts, want on %s with one", m.UUID, m.DeviceID, len(m.Attempts), to.Fingerprint)
		}
	}
}

func uuids(ms []store.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.UUID
	}
	return out
}
