package boltstore

import (
	"fmt"
	"testing"
	"time"
)

// A sticky pool's recipients stay on their member across a restart of
// the store, and the round-robin turn goes on where it was.
func TestPoolStickySurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	c, _ := newCompany(t, s, "a@example.com", "k")
	var devs []Device
	for i := range 3 {
		devs = append(devs, Device{Fingerprint: fmt.Sprintf("fp-%d", i), CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte{'t', byte(i)}})
	}
	if err := s.ProvisionDevices(devs); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	def := PoolInput{Name: "keep", Strategy: PoolSticky, Fallback: PoolRoundRobin, Members: []PoolMemberInput{{Device: "fp-0", SIMSlot: "SIM1"}, {Device: "fp-1", SIMSlot: "SIM1"}, {Device: "fp-2", SIMSlot: "SIM2"}}}
	if _, err := s.PutPool(c.ID, 0, t0, func(Pool) (PoolInput, error) { return def, nil }); err != nil {
		t.Fatal(err)
	}
	n := 0
	send := func(s *Store, to string) string {
		t.Helper()
		n++
		m := Message{UUID: fmt.Sprintf("u-%d", n), CompanyID: c.ID, Pool: "keep", Channel: "sms", Phone: to, Text: "x"}
		out, _, err := s.Enqueue(&m, IdempotencyKey{}, now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.PoolID == 0 || out.DeviceID == 0 {
			t.Fatalf("got %+v, want the pool's member on the message", out)
		}
		return out.Device + "/" + out.SIMSlot
	}
	before := map[string]string{}
	for i := range 3 {
		to := fmt.Sprintf("+1555000000%d", i)
		before[to] = send(s, to)
	}
	if len(map[string]bool{before["+15550000000"]: true, before["+15550000001"]: true, before["+15550000002"]: true}) != 3 {
		t.Fatalf("three new recipients: %v, want one per member", before)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	for to, was := range before {
		if got := send(s, to); got != was {
			t.Errorf("after a restart %s went from %s, want %s", to, got, was)
		}
	}
	// The turn survived too: the next new recipient goes to the first member again.
	if got := send(s, "+15550000009"); got != "fp-0/SIM1" {
		t.Errorf("the next new recipient went from %s, want fp-0/SIM1", got)
	}
}
