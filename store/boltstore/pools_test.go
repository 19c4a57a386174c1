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

// The per-SIM counts of past days and months and the recipients of past
// days are pruned; today's stay, and so do the caps.
func TestSIMCountsPruned(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	day1 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if _, err := s.SetSIMCaps(c.ID, "fp", map[string]SIMCaps{"SIM1": {PerDay: 5, RecipientsPerDay: 5}}, day1); err != nil {
		t.Fatal(err)
	}
	send := func(at time.Time, to string) {
		t.Helper()
		m := Message{UUID: to + at.String(), CompanyID: c.ID, Device: "fp", Channel: "sms", Phone: to, Text: "x", SIMSlot: "SIM1"}
		if _, _, err := s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return at }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	send(day1, "+15550000001")
	send(day1, "+15550000002")
	day2 := day1.Add(24 * time.Hour) // December 1st: a new day and a new month
	send(day2, "+15550000001")
	n, err := s.PruneSIMCounts(day2)
	if err != nil {
		t.Fatal(err)
	}
	// Day 1's day count, recipients count and month count, and its two recipients.
	if n != 5 {
		t.Errorf("pruned %d keys, want 5", n)
	}
	us, err := s.SIMUsages(c.ID, "fp", day2)
	if err != nil {
		t.Fatal(err)
	}
	if u := us[0]; u.Day != 1 || u.Month != 1 || u.Recipients != 1 || u.Caps.PerDay != 5 {
		t.Errorf("after pruning: %+v, want today's counts and the caps kept", u)
	}
}
