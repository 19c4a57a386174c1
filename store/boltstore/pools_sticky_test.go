package boltstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Sticky entries older than StickyAge are pruned, fresh ones kept, and a
// recipient whose entry went still goes to the member it last talked to
// (its newest conversation).
func TestStickyEntriesAgeAndPrune(t *testing.T) {
	t.Parallel()
	s, c := twoPhones(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	def := PoolInput{Name: "p", Strategy: PoolSticky, Fallback: PoolRoundRobin,
		Members: []PoolMemberInput{{Device: "fp-a", SIMSlot: "SIM1"}, {Device: "fp-b", SIMSlot: "SIM1"}}}
	if _, err := s.PutPool(c.ID, 0, t0, func(Pool) (PoolInput, error) { return def, nil }); err != nil {
		t.Fatal(err)
	}
	n := 0
	send := func(phone string, at time.Time) string {
		t.Helper()
		n++
		m := Message{UUID: "s-" + time.Duration(n).String(), CompanyID: c.ID, Pool: "p", Phone: phone, Text: "x"}
		out, _, err := s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return at }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out.Device
	}
	entries := func() int {
		t.Helper()
		var k int
		if err := s.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPoolSticky).ForEach(func(_, _ []byte) error { k++; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		return k
	}
	old := send("+15550000001", t0)
	later := t0.Add(StickyAge + 24*time.Hour)
	send("+15550000002", later)
	if got := entries(); got != 2 {
		t.Fatalf("%d sticky entries, want 2", got)
	}
	if pruned, err := s.PruneSticky(later.Add(-StickyAge)); err != nil || pruned != 1 {
		t.Fatalf("pruned %d (%v), want the old entry only", pruned, err)
	}
	if got := entries(); got != 1 {
		t.Fatalf("%d sticky entries after the prune, want the fresh one", got)
	}
	// A third recipient takes round robin's turn, so its next pick is the
	// other member; the conversation keeps the first recipient where it was.
	if third := send("+15550000003", later); third != old {
		t.Fatalf("the third recipient went to %s, want round robin's %s", third, old)
	}
	if again := send("+15550000001", later); again != old {
		t.Fatalf("the recipient whose entry was pruned went to %s, want %s, the member it last talked to", again, old)
	}
}

// twoPhones is a store holding one company with two active phones, fp-a
// and fp-b, for pool tests.
func twoPhones(t *testing.T) (*Store, Company) {
	t.Helper()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{
		{Fingerprint: "fp-a", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("a")},
		{Fingerprint: "fp-b", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("b")},
	}); err != nil {
		t.Fatal(err)
	}
	return s, c
}

// A deleted device leaves every pool it was in, in the deletion's
// transaction; a phone registered again under its fingerprint is a new
// device and joins none.
func TestDeletedDeviceLeavesItsPools(t *testing.T) {
	t.Parallel()
	s, c := twoPhones(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	def := PoolInput{Name: "p", Strategy: PoolRoundRobin, Members: []PoolMemberInput{{Device: "fp-a", SIMSlot: "SIM1"}, {Device: "fp-b", SIMSlot: "SIM1"}}}
	p, err := s.PutPool(c.ID, 0, t0, func(Pool) (PoolInput, error) { return def, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteDevice(c.ID, "fp-a", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pool(c.ID, p.ID)
	if err != nil || len(got.Members) != 1 || got.Members[0].Device != "fp-b" || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("pool after fp-a's deletion: %+v (%v), want fp-b alone", got, err)
	}
}
