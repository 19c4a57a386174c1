package boltstore

import (
	"errors"
	"testing"
	"time"
)

// TestDeviceIDs: a re-registration within the company keeps the device's
// id; a registration after a delete, in the same company or another, gets
// a new one; acts for a company or a link find only their own registration.
func TestDeviceIDs(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	a, _ := newCompany(t, s, "a@example.com", "ka")
	b, _ := newCompany(t, s, "b@example.com", "kb")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	n := 0
	register := func(companyID uint64, fp string) (Device, bool, error) {
		n++
		code := []byte{byte(n)}
		if err := s.PutPairing(code, Pairing{CompanyID: companyID, ExpiresAt: now.Add(time.Hour)}, now); err != nil {
			t.Fatal(err)
		}
		return s.RegisterDevice(code, now, fp, func(Pairing, *Device) (Device, error) {
			return Device{Status: DeviceActive, TokenHash: []byte{'t', byte(n)}}, nil
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
	if _, _, err := register(b.ID, "x"); !errors.Is(err, ErrConflict) {
		t.Fatalf("another company's registration of a live fingerprint: %v, want ErrConflict", err)
	}
	// Acts for another company find nothing.
	if _, err := s.DeleteDevice(b.ID, "x", now); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete by another company: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateDevice(b.ID, "x", func(d *Device) error { d.Name = "mine"; return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("update by another company: %v, want ErrNotFound", err)
	}
	if _, err := s.CompanyDevice(b.ID, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("read by another company: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteDevice(a.ID, "x", now); err != nil {
		t.Fatal(err)
	}
	// After the delete, a new registration is a new device, in either company.
	readded, _, err := register(a.ID, "x")
	if err != nil || readded.ID == first.ID || readded.ID == 0 {
		t.Fatalf("registration after a delete: id %d (%v), want a new one (not %d)", readded.ID, err, first.ID)
	}
	// The deleted registration's link finds nothing, though the fingerprint lives.
	if _, err := s.UpdateDeviceByID(a.ID, first.ID, func(d *Device) error { d.Name = "stale"; return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("update by the deleted registration's id: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteDevice(a.ID, "x", now); err != nil {
		t.Fatal(err)
	}
	other, _, err := register(b.ID, "x")
	if err != nil || other.ID == first.ID || other.ID == readded.ID {
		t.Fatalf("another company's registration: id %d (%v), want a new one", other.ID, err)
	}
	if _, err := s.UpdateDeviceByID(a.ID, other.ID, func(*Device) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of B's device with A's company: %v, want ErrNotFound", err)
	}
	if got, err := s.UpdateDeviceByID(b.ID, other.ID, func(d *Device) error { d.Name = "B's"; return nil }); err != nil || got.Name != "B's" || got.ID != other.ID {
		t.Errorf("update by its own link: %+v (%v)", got, err)
	}
	if list, err := s.CompanyDevices(a.ID); err != nil || len(list) != 0 {
		t.Errorf("A's devices: %+v (%v), want none", list, err)
	}
	if list, err := s.CompanyDevices(b.ID); err != nil || len(list) != 1 || list[0].ID != other.ID {
		t.Errorf("B's devices: %+v (%v), want B's one", list, err)
	}
}
