package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// A bulk send's statements do not grow with its messages beyond one each
// (its queue place, taken under its device's lock as a single send's):
// the opt-outs, the ids and the rows go in one statement each.
func TestBulkStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "bulk-stmts")
	const n = 200
	ms := make([]store.Message, n)
	for i := range ms {
		ms[i] = store.Message{UUID: fmt.Sprintf("bulk-stmts-%d", i), CompanyID: c.ID, Device: "bulk-stmts", SIMSlot: "SIM1",
			Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i), Text: "hello"}
	}
	ms[n-1].SendAt = conformance.T0.Add(time.Hour) // one scheduled: no queue place
	stmts.n.Store(0)
	out, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, func([]store.Message) (int, []byte) { return 202, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d statements", stmts.n.Load())
	if got, most := stmts.n.Load(), int64(n-1+20); got > most {
		t.Errorf("a bulk send of %d messages took %d statements, want at most %d", n, got, most)
	}
	for i := 1; i < n; i++ {
		if out[i].ID <= out[i-1].ID {
			t.Fatalf("ids not rising in input order: %d then %d", out[i-1].ID, out[i].ID)
		}
	}
	for i := range out {
		got, err := s.MessageByUUID(c.ID, out[i].UUID)
		if err != nil || got.ID != out[i].ID || got.Status != out[i].Status || got.QueueSeq != out[i].QueueSeq || got.Phone != ms[i].Phone {
			t.Fatalf("message %d read back: %+v (%v), want %+v", i, got, err, out[i])
		}
	}
}
