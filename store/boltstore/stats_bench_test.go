package boltstore

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// countBench feeds the counters as the write paths do (count), in one
// transaction: for each device 1..devices, each of its days, a delivered
// outbound message of the API key and an inbound one.
func countBench(b *testing.B, s *Store, company uint64, devices uint64, days func(dev uint64) []uint32) {
	b.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for dev := uint64(1); dev <= devices; dev++ {
			fp := fmt.Sprint("d-", dev)
			for _, day := range days(dev) {
				at := StatsDate(day).Add(time.Hour)
				out := Message{CompanyID: company, DeviceID: dev, Device: fp, Channel: "sms", Direction: Outbound, Segments: 1}
				if err := count(tx, out, at, Counts{Sent: 5, Delivered: 5, Segments: 5}); err != nil {
					return err
				}
				in := Message{CompanyID: company, DeviceID: dev, Device: fp, Channel: "sms", Direction: Inbound}
				if err := count(tx, in, at, Counts{Received: 5}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStats90Days sums 90 days of counters of 50 busy devices and two
// users each (9,000 per-device records), as the analytics route does.
func BenchmarkStats90Days(b *testing.B) {
	s, c := benchStore(b)
	today := StatsDay(time.Now())
	countBench(b, s, c.ID, 50, func(uint64) []uint32 {
		days := make([]uint32, 0, 90)
		for day := today - 89; day <= today; day++ {
			days = append(days, day)
		}
		return days
	})
	b.ResetTimer()
	for b.Loop() {
		st, err := s.Stats(StatsQuery{CompanyID: c.ID, From: today - 89, To: today})
		if err != nil || st.Totals.Sent != 90*50*5 || len(st.ByDevice) != 50 {
			b.Fatal(fmt.Sprint(st.Totals, err))
		}
	}
}

// BenchmarkStats90DaysFleet sums 90 days of a fleet of 10,000 devices, each
// active on three of them (60,000 per-device records), as the analytics
// route does with no filter: the totals, the series and every device's sum.
func BenchmarkStats90DaysFleet(b *testing.B) {
	s, c := benchStore(b)
	today := StatsDay(time.Now())
	countBench(b, s, c.ID, 10000, func(dev uint64) []uint32 {
		return []uint32{today - 89 + uint32(dev%45), today - 44 + uint32(dev%44), today}
	})
	b.ResetTimer()
	for b.Loop() {
		st, err := s.Stats(StatsQuery{CompanyID: c.ID, From: today - 89, To: today})
		if err != nil || st.Totals.Sent != 10000*3*5 || len(st.ByDevice) != 10000 {
			b.Fatal(fmt.Sprint(st.Totals, err))
		}
	}
}

// BenchmarkStats90DaysOneDevice is the same fleet filtered to one device.
func BenchmarkStats90DaysOneDevice(b *testing.B) {
	s, c := benchStore(b)
	today := StatsDay(time.Now())
	countBench(b, s, c.ID, 10000, func(dev uint64) []uint32 {
		return []uint32{today - 89 + uint32(dev%45), today - 44 + uint32(dev%44), today}
	})
	b.ResetTimer()
	for b.Loop() {
		st, err := s.Stats(StatsQuery{CompanyID: c.ID, From: today - 89, To: today, Devices: map[uint64]bool{77: true}})
		if err != nil || st.Totals.Sent != 3*5 {
			b.Fatal(fmt.Sprint(st.Totals, err))
		}
	}
}

// BenchmarkStats90DaysOneUser sums 90 days of one user of 50, each sending
// through 20 of 1,000 devices every day (90,000 full records), as the
// analytics route does under a users filter.
func BenchmarkStats90DaysOneUser(b *testing.B) {
	s, c := benchStore(b)
	today := StatsDay(time.Now())
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for day := today - 89; day <= today; day++ {
			at := StatsDate(day).Add(time.Hour)
			for user := uint64(1); user <= 50; user++ {
				for i := range uint64(20) {
					dev := 1 + (user*20+i)%1000
					m := Message{CompanyID: c.ID, UserID: user, DeviceID: dev, Device: fmt.Sprint("d-", dev), Channel: "sms", Direction: Outbound, Segments: 1}
					if err := count(tx, m, at, Counts{Sent: 1, Delivered: 1, Segments: 1}); err != nil {
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
		st, err := s.Stats(StatsQuery{CompanyID: c.ID, From: today - 89, To: today, Users: map[uint64]bool{7: true}})
		if err != nil || st.Totals.Sent != 90*20 || len(st.ByDevice) != 20 {
			b.Fatal(fmt.Sprint(st.Totals, len(st.ByDevice), err))
		}
	}
}

// BenchmarkDashboardSummary reads the dashboard of a company with 1,000
// devices, a month of counters of 50 of them, and a full activity ring.
func BenchmarkDashboardSummary(b *testing.B) {
	benchDashboard(b, 1000, 50, func(today uint32, _ uint64) []uint32 {
		days := make([]uint32, 0, 31)
		for day := today - 30; day <= today; day++ {
			days = append(days, day)
		}
		return days
	})
}

// BenchmarkDashboardSummaryFleet is the same with 10,000 devices, each
// counted on three days of the month.
func BenchmarkDashboardSummaryFleet(b *testing.B) {
	benchDashboard(b, 10000, 10000, func(today uint32, dev uint64) []uint32 {
		return []uint32{today - 30 + uint32(dev%15), today - 14 + uint32(dev%14), today}
	})
}

func benchDashboard(b *testing.B, devices int, busy uint64, days func(today uint32, dev uint64) []uint32) {
	s, c := benchStore(b)
	devs := make([]Device, devices)
	for i := range devs {
		devs[i] = Device{Fingerprint: fmt.Sprint("d-", i), CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte(fmt.Sprint("t-", i))}
	}
	if err := s.ProvisionDevices(devs); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	today := StatsDay(now)
	var want uint64
	countBench(b, s, c.ID, busy, func(dev uint64) []uint32 {
		d := days(today, dev)
		want += uint64(len(d)) * 5
		return d
	})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for range ActivityKeep {
			if err := addActivity(tx, c.ID, Activity{Type: ActMessageSent, At: now, Description: "SMS to +1555… sent via Pixel 7"}); err != nil {
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
		if err != nil || sum.ActiveDevices != devices+1 || len(sum.Recent) != 10 || sum.PeriodSegments != want {
			b.Fatal(sum, err)
		}
	}
}

// BenchmarkReportGrouped is the report path that feeds the counters: many
// concurrent phones' delivered reports, spread over 1,000 devices, each
// durable before it returns, sharing commits.
func BenchmarkReportGrouped(b *testing.B) {
	s, c := benchStore(b)
	devs := make([]Device, 1000)
	for i := range devs {
		devs[i] = Device{Fingerprint: fmt.Sprint("d-", i), CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte(fmt.Sprint("t-", i))}
	}
	if err := s.ProvisionDevices(devs); err != nil {
		b.Fatal(err)
	}
	msgs := make([]Message, b.N)
	now := time.Now()
	for i := range msgs {
		msgs[i] = Message{UUID: fmt.Sprint("r-", i), CompanyID: c.ID, Device: devs[i%len(devs)].Fingerprint, Channel: "sms", Direction: Outbound,
			Status: MsgSending, Phone: "+15551234567", Text: "hello", SIMSlot: "SIM1", Segments: 1, CreatedAt: now, UpdatedAt: now}
	}
	for batch := range slices.Chunk(msgs, 20000) {
		if err := s.ImportMessages(batch); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m := msgs[next.Add(1)-1]
			if _, moved, err := s.Transition(m.CompanyID, m.DeviceID, m.UUID, MsgDelivered, "", "", time.Now()); err != nil || !moved {
				b.Fatal(moved, err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
