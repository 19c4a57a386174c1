package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestFailoverBatchStatements: a failover batch costs the same statements
// for 300 jobs as for 30, to members whose SIMs have a recipients cap: the
// jobs' places and rows are written for the whole batch, and whether each
// SIM sent to each recipient today is read once for the batch, not one
// statement (or three) a job. The moves come out as one by one: every job
// on a new member once, the recipients counted exactly.
func TestFailoverBatchStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	at := conformance.T0.Add(2 * time.Minute)
	costs := map[int]int64{}
	for _, n := range []int{30, 300} {
		from := conformance.Device(t, s, c.ID, fmt.Sprintf("fbs-%d", n))
		var fps []string
		for _, k := range []string{"a", "b"} {
			fp := fmt.Sprintf("fbs-%d-%s", n, k)
			fps = append(fps, fp)
			conformance.Device(t, s, c.ID, fp)
			if _, err := s.SetSIMCaps(c.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 10000}}, conformance.T0); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("fbs%d", n)
		only := []store.PoolMemberInput{{Device: from.Fingerprint, SIMSlot: "SIM1"}}
		p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: only}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ms := make([]store.Message, n)
		for i := range ms {
			// A third of the recipients twice.
			ms[i] = store.Message{UUID: fmt.Sprintf("fbs-%d-%d", n, i), CompanyID: c.ID, Pool: name, SIMSlot: "SIM1", Channel: "sms",
				Phone: fmt.Sprintf("+1555050%04d", i-i/3), Text: "hello"}
		}
		if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
		all := append(only, store.PoolMemberInput{Device: fps[0], SIMSlot: "SIM1"}, store.PoolMemberInput{Device: fps[1], SIMSlot: "SIM1"})
		if _, err := s.PutPool(c.ID, p.ID, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: all}, nil
		}); err != nil {
			t.Fatal(err)
		}
		n0 := stmts.n.Load()
		moved, _, err := s.Failover(store.FailoverInput{CompanyID: c.ID, DeviceID: from.ID, Reason: store.FailoverOffline,
			Pools: map[uint64]bool{p.ID: true}, Limit: 500}, nil, at)
		costs[n] = stmts.n.Load() - n0
		if err != nil || len(moved) != n {
			t.Fatalf("%d jobs: %d moved (%v)", n, len(moved), err)
		}
		sentTo := map[string]map[string]bool{}
		for _, m := range moved {
			if m.Device == from.Fingerprint || len(m.Attempts) != 1 {
				t.Fatalf("%d jobs: moved %s to %s with %d attempts", n, m.UUID, m.Device, len(m.Attempts))
			}
			if sentTo[m.Device] == nil {
				sentTo[m.Device] = map[string]bool{}
			}
			sentTo[m.Device][m.Phone] = true
		}
		for _, fp := range fps {
			us, err := s.SIMUsages(c.ID, fp, at)
			if err != nil || us[0].Recipients != int64(len(sentTo[fp])) {
				t.Errorf("%d jobs: %s's SIM1 counts %d recipients (%v), want the %d it took", n, fp, us[0].Recipients, err, len(sentTo[fp]))
			}
		}
	}
	t.Logf("a failover batch of 30 jobs to SIMs with a recipients cap, %d statements; of 300, %d", costs[30], costs[300])
	if costs[30] != costs[300] {
		t.Errorf("a failover batch of 30 jobs took %d statements, one of 300 %d: want the same", costs[30], costs[300])
	}
}
