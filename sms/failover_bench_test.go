package sms_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// offlineHub is a hub on which every device has been offline since the
// server started.
type offlineHub struct{}

func (offlineHub) Online(string, uint64) bool            { return false }
func (offlineHub) OfflineSince(string, uint64) time.Time { return time.Time{} }
func (offlineHub) HoldDevice(_ string, _ uint64, fn func(uint64, bool) error) error {
	return fn(0, false)
}

// BenchmarkFailoverSweep is one failover sweep over 5,000 offline devices,
// 25 pools of 200 members with failover on, all past failover_after, with
// empty queues: the sweep's own work plus one read of each device's queue.
//
//	go test ./sms -run '^$' -bench FailoverSweep -benchtime 5x
func BenchmarkFailoverSweep(b *testing.B) {
	const pools, perPool = 25, store.MaxPoolMembers
	st := storetest.OpenWith(b, storetest.Options{})
	c := storetest.Company(b, st, "Acme", "a@acme.test")
	devs := make([]store.Device, 0, pools*perPool)
	for i := range pools * perPool {
		devs = append(devs, store.Device{Fingerprint: fmt.Sprintf("fo-%05d", i), CompanyID: c.ID, Name: "P", Status: store.DeviceActive,
			SelectedSIM: "BOTH", TokenHash: fmt.Appendf(nil, "t%d", i), CreatedAt: time.Now()})
	}
	if err := st.ProvisionDevices(devs); err != nil {
		b.Fatal(err)
	}
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	if err := svc.SetFailoverHub(offlineHub{}); err != nil {
		b.Fatal(err)
	}
	after := int64(60)
	for p := range pools {
		name := fmt.Sprintf("fo%d", p)
		var members []sms.PoolMemberInput
		for _, d := range devs[p*perPool : (p+1)*perPool] {
			members = append(members, sms.PoolMemberInput{Device: d.Fingerprint, SIMSlot: "SIM1"})
		}
		if _, err := svc.CreatePool(context.Background(), c.ID, sms.PoolInput{Name: &name, FailoverAfter: &after, Members: &members}); err != nil {
			b.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	for b.Loop() {
		if moved := svc.Failover(); len(moved) != 0 {
			b.Fatalf("moved %d jobs of empty queues", len(moved))
		}
	}
}

// onlineHub is a hub on which the devices whose fingerprint starts with
// "on" are online and every other has been offline since the start.
type onlineHub struct{}

func (onlineHub) Online(fp string, _ uint64) bool       { return strings.HasPrefix(fp, "on") }
func (onlineHub) OfflineSince(string, uint64) time.Time { return time.Time{} }
func (onlineHub) HoldDevice(_ string, _ uint64, fn func(uint64, bool) error) error {
	return fn(0, false)
}

// BenchmarkFailoverMove moves the 5,000 queued jobs of a pool's offline
// device to its four other members, whose SIMs have a recipients cap (so
// each move asks whether the SIM sent to the recipient today): the sweeps
// it takes, and the jobs moved a second of their work.
//
//	go test ./sms -run '^$' -bench FailoverMove -benchtime 3x
//	SIMRELAY_TEST_STORE=postgres go test ./sms -run '^$' -bench FailoverMove -benchtime 3x
func BenchmarkFailoverMove(b *testing.B) {
	const jobs, others = 5000, 4
	st := storetest.OpenWith(b, storetest.Options{})
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	ctx := context.Background()
	sweeps, round := 0, 0
	for b.Loop() {
		b.StopTimer()
		round++
		c := storetest.Company(b, st, fmt.Sprintf("Acme %d", round), fmt.Sprintf("a%d@acme.test", round))
		fps := []string{fmt.Sprintf("gone-%d", round)}
		for k := range others {
			fps = append(fps, fmt.Sprintf("on-%d-%d", round, k))
		}
		var devs []store.Device
		for i, fp := range fps {
			devs = append(devs, store.Device{Fingerprint: fp, CompanyID: c.ID, Name: fp, Status: store.DeviceActive,
				SelectedSIM: "BOTH", TokenHash: fmt.Appendf(nil, "t%d-%d", round, i), CreatedAt: clock.Now()})
		}
		if err := st.ProvisionDevices(devs); err != nil {
			b.Fatal(err)
		}
		capped := int64(1_000_000)
		for _, fp := range fps[1:] {
			if _, err := svc.SetSIMCaps(ctx, c.ID, fp, []sms.SIMCapsInput{{Slot: "SIM1", RecipientsPerDay: &capped}}); err != nil {
				b.Fatal(err)
			}
		}
		name, after := "fo", int64(60)
		members := []sms.PoolMemberInput{{Device: fps[0], SIMSlot: "SIM1"}}
		p, err := svc.CreatePool(ctx, c.ID, sms.PoolInput{Name: &name, FailoverAfter: &after, Members: &members})
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.SetFailoverHub(onlineHub{}); err != nil {
			b.Fatal(err)
		}
		for k := range jobs / sms.MaxBulk {
			items := make([]sms.BulkItem, sms.MaxBulk)
			for i := range items {
				items[i] = sms.BulkItem{Phone: fmt.Sprintf("+1555%07d", k*sms.MaxBulk+i), Message: "hello"}
			}
			if _, _, err := svc.SendBulk(ctx, sms.BulkInput{CompanyID: c.ID, Pool: "fo", Messages: items}, nil); err != nil {
				b.Fatal(err)
			}
		}
		for _, fp := range fps[1:] {
			members = append(members, sms.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
		}
		if _, err := svc.UpdatePool(ctx, c.ID, p.ID, sms.PoolInput{Members: &members}); err != nil {
			b.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		b.StartTimer()
		moved := 0
		for i := 0; moved < jobs; i++ {
			if i == 100 {
				b.Fatalf("100 sweeps moved %d of %d jobs", moved, jobs)
			}
			moved += len(svc.Failover())
			sweeps++
		}
		if moved != jobs {
			b.Fatalf("moved %d jobs, want %d", moved, jobs)
		}
	}
	b.ReportMetric(float64(sweeps)/float64(b.N), "sweeps/op")
	b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "jobs/s")
}
