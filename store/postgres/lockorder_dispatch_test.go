package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestDispatchLocksJobsFirst: a phone's read of its queue that finds two
// jobs to a number that opted out (a priority job, queued last, and a
// plain one) fails both in one transaction while the device is deleted,
// which locks its jobs in id order. The read's write locked them one by
// one in the queue's order, the priority job first, each after the one
// before it was counted: it held the later job and waited for the
// earlier, which the deletion held while it waited for the later, and the
// database broke the deadlock. It now locks them all first, in id order.
func TestDispatchLocksJobsFirst(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "phone")
	const who = "+15550100003"
	var jobs []store.Message
	for i, prio := range []int{0, 1} {
		m := store.Message{UUID: fmt.Sprint("job-", i), CompanyID: c.ID, Device: "phone", SIMSlot: "SIM1", Channel: "sms", Phone: who, Text: "hi",
			Segments: 1, Priority: prio}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, got)
	}
	if _, _, err := s.AddOptOut(c.ID, who, time.Now()); err != nil {
		t.Fatal(err)
	}
	var delErr, readErr error
	var read []store.Message
	raceBehindLock(t, s, "SELECT 1 FROM messages WHERE id = $1 FOR UPDATE", jobs[0].ID,
		func() { _, delErr = s.DeleteDevice(c.ID, "phone", time.Now()) },
		func() { read, readErr = s.Pending(c.ID, d.ID, 0, 10, time.Now(), nil) })
	if delErr != nil || readErr != nil {
		t.Fatalf("the deletion: %v; the read: %v", delErr, readErr)
	}
	if len(read) != 2 {
		t.Errorf("the read found %d jobs, want both", len(read))
	}
	for _, j := range jobs {
		if m, err := s.MessageByUUID(c.ID, j.UUID); err != nil || m.Status != store.MsgFailed {
			t.Errorf("job %s is %s (%v), want failed", j.UUID, m.Status, err)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks, in %q", n, dl.sql)
	}
}
