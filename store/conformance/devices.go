package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// DevicesStore is what the devices suite calls.
type DevicesStore interface {
	Base
	Device(fingerprint string) (store.Device, error)
	DeviceByTokenHash(hash []byte) (store.Device, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
}

// Devices runs the suite of device registrations.
func Devices(t *testing.T, open Opener[DevicesStore]) {
	t.Run("IDs", func(t *testing.T) { t.Parallel(); deviceIDs(t, open(t)) })
}

// deviceIDs: a re-registration within the company keeps the device's id; a
// registration after a delete, in the same company or another, gets a new
// one; a live fingerprint of another company is ErrConflict; acts for a
// company find only its own registration.
func deviceIDs(t *testing.T, s DevicesStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	n := 0
	register := func(companyID uint64, fp string) (store.Device, bool, error) {
		n++
		code := []byte{'c', byte(n)}
		if err := s.PutPairing(code, store.Pairing{CompanyID: companyID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
			t.Fatal(err)
		}
		return s.RegisterDevice(code, T0, fp, func(store.Pairing, *store.Device) (store.Device, error) {
			return store.Device{Status: store.DeviceActive, TokenHash: []byte{'t', byte(n)}}, nil
		})
	}
	first, _, err := register(a.ID, "x")
	if err != nil || first.ID == 0 {
		t.Fatalf("first registration: %+v (%v), want an id", first, err)
	}
	again, replaced, err := register(a.ID, "x")
	if err != nil || !replaced || again.ID != first.ID {
		t.Fatalf("re-registration: id %d replaced %v (%v), want id %d kept", again.ID, replaced, err, first.ID)
	}
	if _, err := s.DeviceByTokenHash([]byte{'t', 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replaced token: %v, want ErrNotFound", err)
	}
	if d, err := s.DeviceByTokenHash(again.TokenHash); err != nil || d.ID != first.ID {
		t.Fatalf("the new token: %+v (%v)", d, err)
	}
	if _, _, err := register(b.ID, "x"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another company's registration of a live fingerprint: %v, want ErrConflict", err)
	}
	if _, err := s.CompanyDevice(b.ID, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's device: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteDevice(b.ID, "x", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete by another company: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteDevice(a.ID, "x", T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Device("x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted device: %v, want ErrNotFound", err)
	}
	later, _, err := register(b.ID, "x")
	if err != nil || later.ID == first.ID || later.CompanyID != b.ID {
		t.Fatalf("registration after the delete: %+v (%v), want a new id in company %d", later, err, b.ID)
	}
	if ds, err := s.CompanyDevices(a.ID); err != nil || len(ds) != 0 {
		t.Fatalf("company a's devices after the move: %d (%v), want none", len(ds), err)
	}
	if ds, err := s.CompanyDevices(b.ID); err != nil || len(ds) != 1 || ds[0].ID != later.ID {
		t.Fatalf("company b's devices: %+v (%v)", ds, err)
	}
}
