package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// BenchmarkPruneBacklog measures one prune of a large backlog of expired
// idempotency answers (SIMRELAY_BENCH_PRUNE_ROWS, 1,000,000 by default:
// a few hours of a busy server's keys after an outage stopped the sweeps)
// while sends go on beside it: one claiming fresh keys and one claiming
// expired keys, the oldest first, which the prune deletes first (clients
// retrying day-old Idempotency-Keys), each one send at a time. It reports the rows the prune
// deleted a second and the longest each kind of send waited.
func BenchmarkPruneBacklog(b *testing.B) {
	rows := 1_000_000
	if v := os.Getenv("SIMRELAY_BENCH_PRUNE_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	now := time.Now().UTC()
	cutoff := now.Add(-24 * time.Hour)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, _ := openCounted(b, Options{})
		if _, err := s.pool.Exec(ctx, `INSERT INTO idempotency (company_id, route, key, created_at, rec)
			SELECT 1, 'send', 'old-' || g, $2::timestamptz - make_interval(secs => $1 - g), '{"status": 202}'
			FROM generate_series(1, $1::int) g`, rows, cutoff.Add(-time.Minute)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE idempotency"); err != nil {
			b.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		longest := make([]time.Duration, 2)
		sends := make([]int, 2)
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; !stop.Load(); n++ {
					key := fmt.Sprint("new-", n)
					if w == 1 { // the oldest expired keys, which the prune deletes first
						key = fmt.Sprint("old-", n+1)
					}
					start := time.Now()
					err := s.write("claim", func(t *txn) error {
						_, _, err := priorAnswer(t, 1, store.IdempotencyKey{Route: "send", Key: key}, now)
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
					longest[w] = max(longest[w], time.Since(start))
					sends[w]++
				}
			}()
		}
		time.Sleep(100 * time.Millisecond) // the sends under way
		b.StartTimer()
		start := time.Now()
		n, err := s.PruneIdempotency(cutoff)
		took := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		var left int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM idempotency WHERE created_at < $1", cutoff).Scan(&left); err != nil {
			b.Fatal(err)
		}
		// The keys claimed again before the prune reached them are kept.
		if left != 0 || n < rows-sends[1] {
			b.Fatalf("the prune: %d rows, %d expired left; want at least %d and none", n, left, rows-sends[1])
		}
		b.ReportMetric(float64(n)/took.Seconds(), "rows/s")
		b.ReportMetric(took.Seconds(), "prune-s")
		b.ReportMetric(float64(longest[0].Milliseconds()), "fresh-claim-max-ms")
		b.ReportMetric(float64(longest[1].Milliseconds()), "expired-claim-max-ms")
		b.ReportMetric(float64(sends[0]+sends[1]), "claims")
	}
}
