package postgres

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// BenchmarkDeleteDeviceQueue measures the deletion of a device with a long
// queue (SIMRELAY_BENCH_DEVICE_QUEUE messages, 20,000 by default), its
// messages failed Store.deviceBatch a transaction. It reports the
// messages failed a second.
func BenchmarkDeleteDeviceQueue(b *testing.B) {
	queued := 20_000
	if v := os.Getenv("SIMRELAY_BENCH_DEVICE_QUEUE"); v != "" {
		var err error
		if queued, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, _ := openCounted(b, Options{})
		c, _ := conformance.Company(b, s)
		fp := devicesOf(b, s, c.ID, 1)[0]
		m := store.Message{UUID: "first", CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi"}
		first, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		// The rest copied from the first, each its own uuid and queue place.
		if _, err := s.pool.Exec(ctx, `INSERT INTO messages (company_id, device_id, uuid, direction, channel, phone, status, priority,
				queue_place, created_at, updated_at, rec)
			SELECT company_id, device_id, 'q-' || g, direction, channel, phone, status, priority, queue_place + g, created_at, updated_at,
				jsonb_set(rec, '{uuid}', to_jsonb('q-' || g))
			FROM messages, generate_series(1, $2::int) g WHERE id = $1`, id(first.ID), queued-1); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "UPDATE messages SET rec = jsonb_set(rec, '{id}', to_jsonb(id)) WHERE device_id = $1", id(first.DeviceID)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE messages"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute)); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.StopTimer()
		var failed int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM messages WHERE device_id = $1 AND status = 'failed'", id(first.DeviceID)).Scan(&failed); err != nil {
			b.Fatal(err)
		}
		if failed != queued {
			b.Fatalf("%d messages failed, want %d", failed, queued)
		}
		b.ReportMetric(float64(queued)/took.Seconds(), "msgs/s")
		b.ReportMetric(took.Seconds(), "delete-s")
	}
}
