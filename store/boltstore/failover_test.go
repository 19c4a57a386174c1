package boltstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A message that keeps moving keeps its latest MaxAttempts moves, so its
// record does not grow with every drop of its pool's phones.
func TestMovesKeptAreBounded(t *testing.T) {
	t.Parallel()
	s, c := twoPhones(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m := Message{UUID: "u-moves", CompanyID: c.ID, Device: "fp-a", Channel: "sms", Phone: "+15551234567", Text: "x", SIMSlot: "SIM1"}
	m, _, err := s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return t0 }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const moves = MaxAttempts + 5
	for i := range moves {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			from, err := loadByUUID(tx, m.UUID)
			if err != nil {
				return err
			}
			to := "fp-b"
			if from.Device == "fp-b" {
				to = "fp-a"
			}
			d, err := liveDevice(tx, c.ID, to)
			if err != nil {
				return err
			}
			moved := from
			moved.Device = to
			return s.moveJob(tx, from, &moved, d, "device_offline", t0.Add(time.Duration(i+1)*time.Minute))
		}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.MessageByUUID(c.ID, m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Attempts) != MaxAttempts || !got.Attempts[MaxAttempts-1].MovedAt.Equal(t0.Add(moves*time.Minute)) {
		t.Fatalf("after %d moves: %d attempts kept, the last at %v; want %d, the newest last", moves, len(got.Attempts), got.Attempts[len(got.Attempts)-1].MovedAt, MaxAttempts)
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
