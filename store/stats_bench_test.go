package store

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkStats90Days sums 90 days of counters of 50 busy devices and two
// users each (9,000 records), as the analytics route does.
func BenchmarkStats90Days(b *testing.B) {
	s, c := benchStore(b)
	today := StatsDay(time.Now())
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for day := today - 89; day <= today; day++ {
			for dev := uint64(1); dev <= 50; dev++ {
				for _, user := range []uint64{0, StatsNoUser} {
					if err := tx.Bucket(bucketStatsDays).Put(statsDayKey(c.ID, day, ChannelSMS, dev, user), Counts{Sent: 5, Received: 5}.encode()); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		st, err := s.Stats(StatsQuery{CompanyID: c.ID, From: today - 89, To: today})
		if err != nil || st.Totals.Sent != 90*50*2*5 {
			b.Fatal(fmt.Sprint(st.Totals, err))
		}
	}
}

// BenchmarkDashboardSummary reads the dashboard of a company with 1,000
// devices, a month of counters of 50 of them, and a full activity ring.
func BenchmarkDashboardSummary(b *testing.B) {
	s, c := benchStore(b)
	devs := make([]Device, 1000)
	for i := range devs {
		devs[i] = Device{Fingerprint: fmt.Sprint("d-", i), CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte(fmt.Sprint("t-", i))}
	}
	if err := s.ProvisionDevices(devs); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	today := StatsDay(now)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for day := today - 30; day <= today; day++ {
			for dev := uint64(1); dev <= 50; dev++ {
				if err := tx.Bucket(bucketStatsDays).Put(statsDayKey(c.ID, day, ChannelSMS, dev, 0), Counts{Sent: 5, Segments: 5}.encode()); err != nil {
					return err
				}
			}
		}
		for range ActivityKeep {
			if err := addActivity(tx, c.ID, Activity{ActMessageSent, now, "SMS to +1555… sent via Pixel 7"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		sum, err := s.DashboardSummary(c.ID, now.AddDate(0, 0, -30), now.AddDate(0, 0, 1), 10)
		if err != nil || sum.ActiveDevices != 1001 || len(sum.Recent) != 10 {
			b.Fatal(sum, err)
		}
	}
}
