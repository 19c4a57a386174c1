package sms_test

import (
	"context"
	"fmt"
	"log/slog"
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
