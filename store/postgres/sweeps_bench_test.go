package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// seedDue stores n messages of the company scheduled for due, spread over
// the devices fps in turn, a bulk send per device, and returns them.
func seedDue(tb testing.TB, s *Store, companyID uint64, fps []string, n int, due time.Time, edit func(i int, m *store.Message)) []store.Message {
	tb.Helper()
	per := make([][]store.Message, len(fps))
	for i := range n {
		k := i % len(fps)
		m := store.Message{UUID: fmt.Sprintf("due-%d-%d", due.UnixNano(), i), CompanyID: companyID, Device: fps[k], SIMSlot: "SIM1",
			Channel: "sms", Phone: fmt.Sprintf("+1555%07d", i), Text: "due", SendAt: due}
		if edit != nil {
			edit(i, &m)
		}
		per[k] = append(per[k], m)
	}
	var out []store.Message
	at := func() time.Time { return due.Add(-time.Hour) }
	for _, ms := range per {
		if len(ms) == 0 {
			continue
		}
		got, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, at, nil, func([]store.Message) (int, []byte) { return 202, nil })
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, got...)
	}
	return out
}

// devicesOf makes n devices of the company and returns their fingerprints.
func devicesOf(tb testing.TB, s *Store, companyID uint64, n int) []string {
	tb.Helper()
	fps := make([]string, n)
	for i := range fps {
		fps[i] = fmt.Sprintf("sweep-%d-%d", companyID, i)
		conformance.Device(tb, s, companyID, fps[i])
	}
	return fps
}

// BenchmarkReleaseDue measures one sweep releasing 1,000 and 10,000
// scheduled messages that fall due at once, spread over 300 devices of one
// company (a scheduled bulk campaign): the sweep's wall time, its
// statements and its round trips, BEGIN and COMMIT included. Each
// iteration stores its messages first, untimed and uncounted.
func BenchmarkReleaseDue(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, stmts := openCounted(b, Options{})
			c, _ := conformance.Company(b, s)
			fps := devicesOf(b, s, c.ID, 300)
			due := conformance.T0
			var ns, trips int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				due = due.Add(time.Hour)
				seedDue(b, s, c.ID, fps, n, due, nil)
				n0, t0 := stmts.n.Load(), stmts.trips.Load()
				b.StartTimer()
				got, err := s.ReleaseDue(due, n)
				b.StopTimer()
				if err != nil || len(got) != n {
					b.Fatalf("released %d (%v), want %d", len(got), err, n)
				}
				ns, trips = ns+stmts.n.Load()-n0, trips+stmts.trips.Load()-t0
			}
			b.ReportMetric(float64(ns)/float64(b.N), "stmts/sweep")
			b.ReportMetric(float64(trips)/float64(b.N), "trips/sweep")
		})
	}
}

// BenchmarkExpireQueued measures one sweep expiring 1,000 and 10,000
// queued messages whose time to live ended, over 300 devices, as
// BenchmarkReleaseDue measures a release.
func BenchmarkExpireQueued(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, stmts := openCounted(b, Options{})
			c, _ := conformance.Company(b, s)
			fps := devicesOf(b, s, c.ID, 300)
			end := conformance.T0
			var ns, trips int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				end = end.Add(time.Hour)
				seedDue(b, s, c.ID, fps, n, end, func(_ int, m *store.Message) { m.SendAt, m.ExpiresAt = time.Time{}, end })
				n0, t0 := stmts.n.Load(), stmts.trips.Load()
				b.StartTimer()
				got, err := s.ExpireQueued(end.Add(time.Second), n)
				b.StopTimer()
				if err != nil || len(got) != n {
					b.Fatalf("expired %d (%v), want %d", len(got), err, n)
				}
				ns, trips = ns+stmts.n.Load()-n0, trips+stmts.trips.Load()-t0
			}
			b.ReportMetric(float64(ns)/float64(b.N), "stmts/sweep")
			b.ReportMetric(float64(trips)/float64(b.N), "trips/sweep")
		})
	}
}
