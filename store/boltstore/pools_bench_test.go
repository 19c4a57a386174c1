package boltstore

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPoolChoice is the cost of choosing a member per send: reading
// a pool of 100 phones and picking one, as a send's transaction does
// (caps read and counted, the turn and sticky entry written), with 20 jobs
// queued on every phone and, for sticky, 1,000 recipients seen before.
func BenchmarkPoolChoice(b *testing.B) {
	for _, strategy := range []string{PoolRoundRobin, PoolLeastLoaded, PoolSticky} {
		b.Run(strategy, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{BulkLoad: true}) // the setup's thousands of sends need no fsync each
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			c := Company{Name: "Bench", APIKeyHash: []byte("k")}
			if err := s.CreateCompany(&c, &User{Email: "b@example.com", PasswordHash: "x"}); err != nil {
				b.Fatal(err)
			}
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			devs := make([]Device, 100)
			members := make([]PoolMemberInput, 100)
			for i := range devs {
				devs[i] = Device{Fingerprint: fmt.Sprintf("p-%03d", i), CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte(fmt.Sprintf("t%d", i))}
				members[i] = PoolMemberInput{Device: devs[i].Fingerprint, SIMSlot: "SIM1"}
			}
			if err := s.ProvisionDevices(devs); err != nil {
				b.Fatal(err)
			}
			for i := range devs {
				for j := range 20 {
					m := Message{UUID: fmt.Sprintf("q-%d-%d", i, j), CompanyID: c.ID, Device: devs[i].Fingerprint, Phone: "+15550000000", Text: "x", SIMSlot: "SIM1"}
					if _, _, err := s.Enqueue(&m, IdempotencyKey{}, clock, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			def := PoolInput{Name: "bench", Strategy: strategy, Members: members}
			if strategy == PoolSticky {
				def.Fallback = PoolRoundRobin
			}
			if _, err := s.PutPool(c.ID, 0, now, func(Pool) (PoolInput, error) { return def, nil }); err != nil {
				b.Fatal(err)
			}
			phones := make([]string, 1000)
			for i := range phones {
				phones[i] = fmt.Sprintf("+1555%07d", i)
				m := Message{UUID: fmt.Sprintf("s-%d", i), CompanyID: c.ID, Pool: "bench", Phone: phones[i], Text: "x"}
				if _, _, err := s.Enqueue(&m, IdempotencyKey{}, clock, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			tx, err := s.db.Begin(true)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m := Message{CompanyID: c.ID, Pool: "bench", Phone: phones[i%len(phones)]}
				d, r, err := route(tx, nil, &m, nil, now)
				if err != nil || d.refused != nil {
					b.Fatal(err, d.refused)
				}
				if err := r.commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
