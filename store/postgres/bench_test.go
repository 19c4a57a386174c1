package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// statements counts the statements a store sends to the database (BEGIN
// and COMMIT included), the round trips they take (a pgx.Batch is one,
// whatever it holds) and the commits among them: a tracer on every
// connection of its pool.
type statements struct{ n, trips, commits atomic.Int64 }

func (c *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.trips.Add(1)
	if strings.EqualFold(strings.TrimSpace(d.SQL), "commit") {
		c.commits.Add(1)
	}
	return ctx
}

func (c *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips.Add(1)
	return ctx
}

func (c *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }

func (c *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A COPY is one statement and one round trip, however many rows it sends.
func (c *statements) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	c.trips.Add(1)
	return ctx
}

func (c *statements) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// openCounted opens a store on a new database whose statements are counted.
func openCounted(tb testing.TB, opt Options) (*Store, *statements) {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(migrated(tb))
	if err != nil {
		tb.Fatal(err)
	}
	c := &statements{}
	opt.Tracer = c
	s, err := openConfig(context.Background(), cfg, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, c
}

// benchPlans caps every company's messages far above what a benchmark
// sends: the server's plans cap messages, and a capped plan is the path
// whose count is exact.
type benchPlans struct{}

func (benchPlans) Limits(_ store.Subscription, _ bool, now time.Time) store.PlanLimits {
	from, to := store.CalendarMonth(now)
	return store.PlanLimits{Devices: -1, Messages: 1 << 40, PeriodStart: from, PeriodEnd: to}
}

// BenchmarkEnqueue measures single sends as the server makes them (a plan
// that caps messages, the default daily storage budget): from one device,
// one at a time, and from 8 devices of one company at once. It reports
// sends/s and the statements and round trips each send costs, BEGIN and
// COMMIT included.
func BenchmarkEnqueue(b *testing.B) {
	run := func(b *testing.B, devices int, parallel bool) {
		s, stmts := openCounted(b, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
		s.SetPlans(benchPlans{})
		c, _ := conformance.Company(b, s)
		fps := make([]string, devices)
		for i := range fps {
			fps[i] = fmt.Sprintf("bench-%d", i)
			conformance.Device(b, s, c.ID, fps[i])
		}
		var seq, dev atomic.Uint64
		send := func(fp string) {
			m := store.Message{UUID: fmt.Sprintf("bench-%d", seq.Add(1)), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1",
				Channel: "sms", Phone: "+15550100000", Text: "Your code is 123456"}
			if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
				b.Error(err)
			}
		}
		stmts.n.Store(0)
		stmts.trips.Store(0)
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				fp := fps[int(dev.Add(1)-1)%len(fps)]
				for pb.Next() {
					send(fp)
				}
			})
		} else {
			for range b.N {
				send(fps[0])
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
		b.ReportMetric(float64(stmts.n.Load())/float64(b.N), "stmts/op")
		b.ReportMetric(float64(stmts.trips.Load())/float64(b.N), "trips/op")
	}
	b.Run("OneDevice", func(b *testing.B) { run(b, 1, false) })
	b.Run("EightDevices", func(b *testing.B) {
		b.SetParallelism(8) // goroutines per GOMAXPROCS: at least one per device
		run(b, 8, true)
	})
}

// BenchmarkAgentDispatch is agent links' dispatch of WhatsApp jobs, 16
// numbers at once, each dispatching its share one job after another: the
// read of the number's next job, then (HandOut) the record that it goes
// to the device, then the agent's ack. ReadAck is the dispatch without
// the record, for comparison. It reports jobs/s and the round trips each
// job costs.
func BenchmarkAgentDispatch(b *testing.B) {
	for _, handOut := range []bool{false, true} {
		name := "ReadAck"
		if handOut {
			name = "ReadHandOutAck"
		}
		b.Run(name, func(b *testing.B) {
			s, stmts := openCounted(b, Options{})
			s.SetPlans(benchPlans{})
			c, _ := conformance.Company(b, s)
			d := conformance.Device(b, s, c.ID, "bench-agent")
			const numbers = 16
			addrs := make([]string, numbers)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("+1555000%04d", i)
			}
			// One hello announces them all: a hello that leaves a number out lets it go.
			nums, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, addrs, time.Now(), 0)
			if err != nil || len(nums) != numbers {
				b.Fatalf("announce: %v (%v)", nums, err)
			}
			for i := range b.N {
				n := nums[i%numbers]
				m := store.Message{UUID: fmt.Sprint("d", i), CompanyID: c.ID, Channel: n.Channel, NumberRef: n.PublicID, Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
				if _, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			trips := stmts.trips.Load()
			b.ResetTimer()
			var done atomic.Int64
			errs := make(chan error, numbers)
			for k := range numbers {
				go func() {
					n := nums[k]
					var cursor uint64
					for {
						jobs, err := s.AgentPending(c.ID, d.ID, n.ID, cursor, 1)
						if err != nil || len(jobs) == 0 {
							errs <- err
							return
						}
						j := jobs[0]
						cursor = j.ID
						if handOut {
							if ok, err := s.AgentHandOut(c.ID, d.ID, j.ID); err != nil || !ok {
								errs <- fmt.Errorf("hand out %d: %v (%v)", j.ID, ok, err)
								return
							}
						}
						if _, _, err := s.Transition(c.ID, d.ID, j.UUID, store.MsgSending, "", "", time.Now()); err != nil {
							errs <- err
							return
						}
						done.Add(1)
					}
				}()
			}
			for range numbers {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if done.Load() != int64(b.N) {
				b.Fatalf("dispatched %d of %d", done.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(float64(stmts.trips.Load()-trips)/float64(b.N), "trips/job")
		})
	}
}
