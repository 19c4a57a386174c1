package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestPendingCost: a link's read of its device's queue (Pending, once per
// kick, so once per send at most) with jobs in both queues is one round
// trip and its COMMIT: the device's check and both queues go with the
// BEGIN in one batch, where they went one after another (4 round trips).
// It returns the same jobs: the priority ones first, then the plain ones
// up to the limit.
func TestPendingCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "pending-cost")
	for i, prio := range []int{0, 1, 0, 0, 1} {
		m := store.Message{UUID: fmt.Sprintf("pc-%d", i), CompanyID: c.ID, Device: "pending-cost", SIMSlot: "SIM1",
			Channel: "sms", Phone: "+15550100000", Text: "hi", Priority: prio}
		if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	n0, t0 := counted.n.Load(), counted.trips.Load()
	jobs, err := s.Pending(c.ID, d.ID, 0, 4, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stmts, trips := counted.n.Load()-n0, counted.trips.Load()-t0
	if stmts > 5 || trips > 2 {
		t.Errorf("a read of the queue took %d statements in %d round trips, want at most 5 in 2", stmts, trips)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.UUID)
	}
	if want := "[pc-1 pc-4 pc-0 pc-2]"; fmt.Sprint(got) != want {
		t.Errorf("pending %v, want %s", got, want)
	}
}
