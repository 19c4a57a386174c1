package postgres

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// poolOf100 stores a company with 100 devices in one pool of the strategy
// (sticky falling back to round_robin), and returns the company.
func poolOf100(tb testing.TB, s *Store, strategy string) store.Company {
	tb.Helper()
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(tb, s)
	members := make([]store.PoolMemberInput, 100)
	for i := range members {
		fp := fmt.Sprintf("pool-%03d", i)
		conformance.Device(tb, s, c.ID, fp)
		members[i] = store.PoolMemberInput{Device: fp, SIMSlot: "SIM1"}
	}
	def := store.PoolInput{Name: "bench", Strategy: strategy, Members: members}
	if strategy == store.PoolSticky {
		def.Fallback = store.PoolRoundRobin
	}
	if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) { return def, nil }); err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkPoolSends is single sends through a sticky pool of 100 phones
// from 16 goroutines at once: to recipients none of its phones talked to
// (New: the pool looks for the recipient's conversation on every member)
// and to 1,000 it sent to before (Known: the pool's sticky entry). It
// reports sends/s and the statements and round trips each send costs,
// BEGIN and COMMIT included.
//
//	SIMRELAY_TEST_STORE=postgres go test -run '^$' -bench BenchmarkPoolSends -benchtime 2000x ./store/postgres
func BenchmarkPoolSends(b *testing.B) {
	for _, known := range []bool{false, true} {
		name := "New"
		if known {
			name = "Known"
		}
		b.Run(name, func(b *testing.B) {
			s, stmts := openCounted(b, Options{})
			c := poolOf100(b, s, store.PoolSticky)
			var seq atomic.Uint64
			send := func(phone string) {
				m := store.Message{UUID: fmt.Sprintf("pool-%d", seq.Add(1)), CompanyID: c.ID, Pool: "bench",
					Channel: "sms", Phone: phone, Text: "Your code is 123456"}
				if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
					b.Error(err)
				}
			}
			if known {
				for i := range 1000 {
					send(fmt.Sprintf("+1555%07d", i))
				}
			}
			var n atomic.Uint64
			stmts.n.Store(0)
			stmts.trips.Store(0)
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if known {
						send(fmt.Sprintf("+1555%07d", i%1000))
					} else {
						send(fmt.Sprintf("+1666%07d", i))
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
			b.ReportMetric(float64(stmts.n.Load())/float64(b.N), "stmts/op")
			b.ReportMetric(float64(stmts.trips.Load())/float64(b.N), "trips/op")
		})
	}
}

// TestMeasurePoolBulk measures a bulk send of 10,000 messages (each to its
// own recipient) through a pool of 100 phones while 8 goroutines send
// single sends through the same pool: how long the bulk takes and how many
// statements it sends, and how long the single sends under way meanwhile
// took (those that began before it ended and ended after it began). A
// measurement, not a test of speed: it asserts only that every send is
// stored.
//
//	SIMRELAY_MEASURE=1 SIMRELAY_TEST_STORE=postgres go test ./store/postgres -run TestMeasurePoolBulk -v
func TestMeasurePoolBulk(t *testing.T) {
	if os.Getenv("SIMRELAY_MEASURE") == "" {
		t.Skip("a measurement: SIMRELAY_MEASURE=1 runs it")
	}
	for _, strategy := range []string{store.PoolRoundRobin, store.PoolSticky, store.PoolLeastLoaded} {
		t.Run(strategy, func(t *testing.T) {
			url := migrated(t)
			s := openURL(t, url, Options{})
			c := poolOf100(t, s, strategy)
			stmts := &statements{}
			bs := openURL(t, url, Options{Tracer: stmts}) // the bulk's, its statements counted
			var seq atomic.Uint64
			msg := func(phone string) store.Message {
				return store.Message{UUID: fmt.Sprintf("m-%d", seq.Add(1)), CompanyID: c.ID, Pool: "bench",
					Channel: "sms", Phone: phone, Text: "Your code is 123456"}
			}
			bulk := make([]store.Message, 10000)
			for i := range bulk {
				bulk[i] = msg(fmt.Sprintf("+1777%07d", i))
			}
			type span struct{ from, to time.Time }
			stop := make(chan struct{})
			var mu sync.Mutex
			var spans []span
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 100000; i++ {
						select {
						case <-stop:
							return
						default:
						}
						m := msg(fmt.Sprintf("+1888%03d%04d", g, i))
						from := time.Now()
						if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						spans = append(spans, span{from, time.Now()})
						mu.Unlock()
					}
				}()
			}
			time.Sleep(200 * time.Millisecond) // the single sends under way first
			start := time.Now()
			out, _, err := bs.EnqueueBulk(bulk, store.IdempotencyKey{}, time.Now, nil, func([]store.Message) (int, []byte) { return 200, nil })
			end := time.Now()
			time.Sleep(100 * time.Millisecond) // the sends the bulk held end
			close(stop)
			wg.Wait()
			if err != nil || len(out) != len(bulk) {
				t.Fatalf("bulk: %d stored, %v", len(out), err)
			}
			var during []time.Duration
			for _, sp := range spans {
				if sp.from.Before(end) && sp.to.After(start) {
					during = append(during, sp.to.Sub(sp.from))
				}
			}
			slices.Sort(during)
			q := func(p float64) time.Duration {
				if len(during) == 0 {
					return 0
				}
				return during[min(len(during)-1, int(p*float64(len(during))))]
			}
			t.Logf("%s: bulk of %d took %v in %d statements; %d single sends under way meanwhile took p50 %v, p99 %v, max %v",
				strategy, len(bulk), end.Sub(start).Round(time.Millisecond), stmts.n.Load(), len(during),
				q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), q(1).Round(time.Millisecond))
		})
	}
}
