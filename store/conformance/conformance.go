// Package conformance is the behaviour both store backends promise, as tests:
// each suite is a function that takes a way to open a fresh, empty store and
// runs its cases against it. store/boltstore and store/postgres call every
// suite from their own tests, so one set of assertions holds both to the same
// rules (plan limits, budgets, idempotency, tenancy, what a crash keeps).
//
// A suite declares the narrow interface of the methods it calls, embedding
// Base for its fixtures; a backend passes a func returning its own store.
package conformance

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Base is what every suite's fixtures need from a store.
type Base interface {
	CreateCompany(c *store.Company, admin *store.User) error
	PutPairing(hash []byte, p store.Pairing, now time.Time) error
	RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p store.Pairing, old *store.Device) (store.Device, error)) (dev store.Device, replaced bool, sum store.DeviceSummary, err error)
	CompanyDevice(companyID uint64, fingerprint string) (store.Device, error)
}

// Opener opens a new, empty store of type S for one test; the backend
// closes it (and drops what it made) when the test ends.
type Opener[S any] func(t *testing.T) S

// T0 is the time the fixtures start at: a Thursday, mid-month, 10:00 UTC.
var T0 = time.Date(2026, 11, 19, 10, 0, 0, 0, time.UTC)

var seq atomic.Uint64

// unique is a value no other fixture of this process uses (key hashes,
// pairing codes, e-mail addresses), so fixtures never collide in a store.
func unique() uint64 { return seq.Add(1) }

// Company stores a new company with an admin and returns both.
func Company(t testing.TB, st Base) (store.Company, store.User) {
	t.Helper()
	n := unique()
	c := store.Company{Name: fmt.Sprintf("Company %d", n), APIKeyHash: []byte(fmt.Sprintf("key-hash-%d", n)), CreatedAt: T0}
	u := store.User{FirstName: "Ana", Email: fmt.Sprintf("admin-%d@example.com", n), PasswordHash: "set", CreatedAt: T0}
	if err := st.CreateCompany(&c, &u); err != nil {
		t.Fatalf("create company: %v", err)
	}
	return c, u
}

// Device pairs an active device with the fingerprint and two SIMs to the
// company, through a pairing code as a phone would, and returns it.
func Device(t testing.TB, st Base, companyID uint64, fingerprint string) store.Device {
	t.Helper()
	code := []byte(fmt.Sprintf("pairing-%d", unique()))
	if err := st.PutPairing(code, store.Pairing{CompanyID: companyID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
		t.Fatalf("pairing for %s: %v", fingerprint, err)
	}
	token := []byte(fmt.Sprintf("token-%d", unique()))
	d, _, _, err := st.RegisterDevice(code, T0, fingerprint, func(p store.Pairing, old *store.Device) (store.Device, error) {
		return store.Device{
			UserID:      p.UserID,
			Name:        "Phone " + fingerprint,
			Status:      store.DeviceActive,
			SelectedSIM: "SIM1",
			SIMs:        []store.SIM{{Slot: "SIM1", PhoneNumber: "+15550000001"}, {Slot: "SIM2", PhoneNumber: "+15550000002"}},
			TokenHash:   token,
			CreatedAt:   T0,
		}, nil
	})
	if err != nil {
		t.Fatalf("register %s: %v", fingerprint, err)
	}
	return d
}

// twoCompanies stores two companies, a and b, each with one device paired
// (Device): prefix+"-a" to a, prefix+"-b" to b.
func twoCompanies(t testing.TB, st Base, prefix string) (a, b store.Company) {
	t.Helper()
	a, _ = Company(t, st)
	b, _ = Company(t, st)
	Device(t, st, a.ID, prefix+"-a")
	Device(t, st, b.ID, prefix+"-b")
	return a, b
}
