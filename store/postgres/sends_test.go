package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestBulkStatements: a bulk send's statements and round trips do not grow
// with its messages: the opt-outs, the ids, the queue places (takePlaces)
// and the rows go in one statement each, so a request of 300 costs what one
// of 30 does.
func TestBulkStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "bulk-stmts")
	var prev []store.Message
	var costs [][2]int64
	for _, n := range []int{3, 30, 300} {
		ms := make([]store.Message, n)
		for i := range ms {
			ms[i] = store.Message{UUID: fmt.Sprintf("bulk-stmts-%d-%d", n, i), CompanyID: c.ID, Device: "bulk-stmts", SIMSlot: "SIM1",
				Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i), Text: "hello"}
		}
		ms[1].SendAt = conformance.T0.Add(time.Hour) // one scheduled: no queue place
		n0, t0 := stmts.n.Load(), stmts.trips.Load()
		out, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, func([]store.Message) (int, []byte) { return 202, nil })
		if err != nil {
			t.Fatal(err)
		}
		got := [2]int64{stmts.n.Load() - n0, stmts.trips.Load() - t0}
		t.Logf("%d messages: %d statements, %d round trips", n, got[0], got[1])
		// The first request also makes the period's usage row: two
		// statements more. BEGIN goes with the first statement (txn.go).
		if most := [2]int64{14, 13}; got[0] > most[0] || got[1] > most[1] {
			t.Errorf("a bulk send of %d messages took %d statements in %d round trips, want at most %d in %d", n, got[0], got[1], most[0], most[1])
		}
		costs = append(costs, got)
		for i := 1; i < n; i++ {
			if out[i].ID <= out[i-1].ID {
				t.Fatalf("ids not rising in input order: %d then %d", out[i-1].ID, out[i].ID)
			}
		}
		if out[1].QueueSeq != 0 || out[1].Status != store.MsgScheduled {
			t.Fatalf("the scheduled message: %+v, want no queue place", out[1])
		}
		queued := append(append([]store.Message(nil), prev...), out[0])
		queued = append(queued, out[2:]...)
		for i := 1; i < len(queued); i++ {
			if queued[i].QueueSeq <= queued[i-1].QueueSeq {
				t.Fatalf("queue places not rising in input order, after the earlier request's: %d then %d", queued[i-1].QueueSeq, queued[i].QueueSeq)
			}
		}
		prev = queued
		for i := range out {
			got, err := s.MessageByUUID(c.ID, out[i].UUID)
			if err != nil || got.ID != out[i].ID || got.Status != out[i].Status || got.QueueSeq != out[i].QueueSeq || got.Phone != ms[i].Phone {
				t.Fatalf("message %d read back: %+v (%v), want %+v", i, got, err, out[i])
			}
		}
	}
	// The first request of the period also makes the company's rows
	// (its plan's usage row for the period): compare the later two.
	if costs[1] != costs[2] {
		t.Errorf("a bulk send of 30 cost %v (statements, round trips), one of 300 %v: want the same", costs[1], costs[2])
	}
}

// TestBulkPlacesPerDevice: a bulk send through a pool spreads its jobs over
// the members' devices; each device's jobs take places rising in input
// order, above the places its devices had, and each device's next_place is
// its last job's.
func TestBulkPlacesPerDevice(t *testing.T) {
	t.Parallel()
	s := open(t, migrated(t))
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "spread-a")
	conformance.Device(t, s, c.ID, "spread-b")
	if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "spread", Strategy: store.PoolRoundRobin, Members: []store.PoolMemberInput{
			{Device: "spread-a", SIMSlot: "SIM1"}, {Device: "spread-b", SIMSlot: "SIM1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	last := map[uint64]uint64{}
	for round := range 2 {
		ms := make([]store.Message, 40)
		for i := range ms {
			ms[i] = store.Message{UUID: fmt.Sprintf("spread-%d-%d", round, i), CompanyID: c.ID, Pool: "spread",
				Channel: "sms", Phone: fmt.Sprintf("+1555020%04d", i), Text: "hello"}
		}
		out, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range out {
			if m.Status != store.MsgQueued || m.QueueSeq <= last[m.DeviceID] {
				t.Fatalf("round %d, job %d on device %d: %s at place %d, want queued above %d", round, i, m.DeviceID, m.Status, m.QueueSeq, last[m.DeviceID])
			}
			last[m.DeviceID] = m.QueueSeq
		}
		if len(last) != 2 {
			t.Fatalf("the pool used devices %v, want both", last)
		}
		for dev, place := range last {
			var next int64
			if err := s.pool.QueryRow(context.Background(), "SELECT next_place FROM devices WHERE id = $1", int64(dev)).Scan(&next); err != nil || uint64(next) != place {
				t.Fatalf("device %d: next_place %d (%v), want its last job's place %d", dev, next, err, place)
			}
		}
	}
}

// TestSendCost: a single send to a device reads in one round trip (BEGIN
// goes with it, txn.go) and writes in one, then COMMIT (enqueue.go); with
// an idempotency key it claims the key in the read and keeps its answer in
// one more. The plan caps messages and the daily budget is set, as on the
// server, so every check runs.
func TestSendCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "cost")
	for i, tc := range []struct {
		key          string
		stmts, trips int64
	}{
		{"", 9, 3},
		{"cost-key", 11, 4},
	} {
		m := store.Message{UUID: fmt.Sprintf("cost-%d", i), CompanyID: c.ID, Device: "cost", SIMSlot: "SIM1",
			Channel: "sms", Phone: "+15550100000", Text: "Your code is 123456"}
		key := store.IdempotencyKey{Key: tc.key, Route: "POST /chat/send", Digest: "d"}
		n0, t0 := counted.n.Load(), counted.trips.Load()
		out, prior, err := s.Enqueue(&m, key, time.Now, nil, func(m store.Message) (int, []byte) {
			return 202, []byte(fmt.Sprintf(`{"id":%d,"place":%d}`, m.ID, m.QueueSeq))
		})
		if err != nil || prior != nil {
			t.Fatalf("send %d: prior %v, err %v", i, prior, err)
		}
		stmts, trips := counted.n.Load()-n0, counted.trips.Load()-t0
		t.Logf("key %q: %d statements, %d round trips", tc.key, stmts, trips)
		if stmts > tc.stmts || trips > tc.trips {
			t.Errorf("a send (key %q) took %d statements in %d round trips, want at most %d in %d", tc.key, stmts, trips, tc.stmts, tc.trips)
		}
		got, err := s.MessageByUUID(c.ID, m.UUID)
		if err != nil || got.ID != out.ID || got.ID == 0 || got.QueueSeq != out.QueueSeq || got.QueueSeq == 0 || got.Status != store.MsgQueued {
			t.Fatalf("send %d read back: %+v (%v), want %+v", i, got, err, out)
		}
		if tc.key == "" {
			continue
		}
		_, prior, err = s.Enqueue(&m, key, time.Now, nil, nil)
		if want := fmt.Sprintf(`{"id":%d,"place":%d}`, out.ID, out.QueueSeq); err != nil || prior == nil || string(prior.Body) != want {
			t.Fatalf("replay: %+v (%v), want the body %s", prior, err, want)
		}
	}
}

// varPlan caps every company's messages at what limit holds.
type varPlan struct{ limit *atomic.Int64 }

func (p varPlan) Limits(_ store.Subscription, _ bool, now time.Time) store.PlanLimits {
	from, to := store.CalendarMonth(now)
	return store.PlanLimits{Devices: -1, Messages: p.limit.Load(), PeriodStart: from, PeriodEnd: to}
}

// TestSendRefusals: a single send's refusals found in its write batch or
// after it leave nothing behind, and when the plan and the budget both
// refuse, the plan's refusal wins, as it was checked first.
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	day := conformance.T0.Add(72 * time.Hour) // a day the setup charged nothing to
	send := func(n int) store.Message {
		return store.Message{UUID: fmt.Sprintf("refused-%d", n), CompanyID: 0, Device: "refusals", SIMSlot: "SIM1",
			Channel: "sms", Phone: "+15550100000", Text: "Your code is 123456"}
	}
	cost := store.MessageCost(send(0))
	s, _ := openCounted(t, Options{CompanyDailyStorage: 3*cost - 1})
	var limit atomic.Int64
	s.SetPlans(varPlan{&limit})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "refusals")
	enqueue := func(n int) error {
		m := send(n)
		m.CompanyID = c.ID
		_, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return day }, nil, nil)
		return err
	}
	state := func() (used, msgs int64) {
		t.Helper()
		used, err := s.StorageUsed(c.ID, day)
		if err != nil {
			t.Fatal(err)
		}
		from, _ := store.CalendarMonth(day)
		if msgs, _, err = s.Usage(c.ID, from); err != nil {
			t.Fatal(err)
		}
		return used, msgs
	}
	var pe *store.PlanLimitError
	var be *store.BudgetError
	limit.Store(1)
	if err := enqueue(1); err != nil {
		t.Fatal(err)
	}
	// The plan refuses in the write batch, the budget having room.
	if err := enqueue(2); !errors.As(err, &pe) || pe.Limit != 1 {
		t.Fatalf("a send past the plan: %v, want a *PlanLimitError of 1", err)
	}
	if used, msgs := state(); used != cost || msgs != 1 {
		t.Fatalf("after the plan's refusal: %d bytes and %d messages used, want %d and 1", used, msgs, cost)
	}
	if _, err := s.MessageByUUID(c.ID, "refused-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused send was stored: %v", err)
	}
	limit.Store(10)
	if err := enqueue(2); err != nil {
		t.Fatal(err)
	}
	// The third send goes over the budget; at the plan's limit too, the
	// plan's refusal wins.
	limit.Store(2)
	if err := enqueue(3); !errors.As(err, &pe) || pe.Limit != 2 {
		t.Fatalf("a send past the plan and the budget: %v, want a *PlanLimitError of 2", err)
	}
	limit.Store(10)
	if err := enqueue(3); !errors.As(err, &be) || be.Used != 2*cost {
		t.Fatalf("a send past the budget: %v, want a *BudgetError at %d bytes", err, 2*cost)
	}
	if used, msgs := state(); used != 2*cost || msgs != 2 {
		t.Fatalf("after the refusals: %d bytes and %d messages used, want %d and 2", used, msgs, 2*cost)
	}
}
