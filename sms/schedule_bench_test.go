package sms_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// BenchmarkReleaseDue is the scheduler's release of 5,000 scheduled
// messages that fell due, of one company on 10 devices, 1,000 a commit as
// the scheduler releases them (releaseBatch), with no other message
// scheduled (Alone) and with 100,000 more scheduled for the next day
// (AmongLater): the release reads the due ones through the index by due
// time and stops at the first not due, so the two cost the same. It
// reports the time per 1,000 released, and on PostgreSQL the statements.
//
//	go test -run '^$' -bench BenchmarkReleaseDue -benchtime 3x ./sms
//	SIMRELAY_TEST_STORE=postgres go test -run '^$' -bench BenchmarkReleaseDue -benchtime 3x ./sms
func BenchmarkReleaseDue(b *testing.B) {
	const due, later, batch = 5000, 100000, 1000
	for _, tc := range []struct {
		name  string
		later int
	}{{"Alone", 0}, {"AmongLater", later}} {
		b.Run(tc.name, func(b *testing.B) {
			stmts := &storetest.Statements{}
			st := storetest.OpenWith(b, storetest.Options{Statements: stmts})
			c := storetest.Company(b, st, "Acme", "a@acme.test")
			devs := make([]store.Device, 10)
			for i := range devs {
				devs[i] = store.Device{Fingerprint: fmt.Sprintf("rd-%d", i), CompanyID: c.ID, Name: "P", Status: store.DeviceActive,
					SelectedSIM: "BOTH", TokenHash: fmt.Appendf(nil, "rd%d", i), CreatedAt: time.Now()}
			}
			if err := st.ProvisionDevices(devs); err != nil {
				b.Fatal(err)
			}
			now := time.Now().UTC()
			n := 0
			schedule := func(count int, at time.Time) {
				for start := 0; start < count; start += batch {
					ms := make([]store.Message, min(batch, count-start))
					for i := range ms {
						n++
						ms[i] = store.Message{UUID: fmt.Sprintf("rd-%d", n), CompanyID: c.ID, Device: devs[n%len(devs)].Fingerprint,
							SIMSlot: "SIM1", Channel: "sms", Phone: fmt.Sprintf("+1555%07d", n), Text: "hi", SendAt: at}
					}
					if _, _, err := st.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return now }, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			schedule(tc.later, now.Add(24*time.Hour))
			var took time.Duration
			var sent int64
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				at := now.Add(time.Duration(i+1) * time.Minute)
				schedule(due, at)
				b.StartTimer()
				start, before := time.Now(), stmts.Count()
				released := 0
				for {
					out, err := st.ReleaseDue(at, batch)
					if err != nil {
						b.Fatal(err)
					}
					released += len(out)
					if len(out) < batch {
						break
					}
				}
				took += time.Since(start)
				sent += stmts.Count() - before
				if released != due {
					b.Fatalf("released %d, want %d", released, due)
				}
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N)/(due/batch), "ms/1000")
			if storetest.Postgres() {
				b.ReportMetric(float64(sent)/float64(b.N)/(due/batch), "stmts/1000")
			}
		})
	}
}
