package conformance

import (
	"bytes"
	"errors"
	"fmt"
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
	DevicesReportedOnline() ([]store.Device, error)
	UpdateDevice(companyID uint64, fingerprint string, fn func(*store.Device) error) (store.Device, error)
	UpdateDeviceByID(companyID, deviceID uint64, fn func(*store.Device) error) (store.Device, error)
	DeviceFailures(companyID, deviceID uint64) ([]store.DeviceFailure, error)
	Pairing(hash []byte) (store.Pairing, error)
	PrunePairings(cutoff time.Time) (int, error)
	ProvisionDevices(devs []store.Device) error
	Company(companyID uint64) (store.Company, error)
	UpdateCompany(companyID uint64, fn func(*store.Company) error) (store.Company, error)
}

// Devices runs the suite of device registrations.
func Devices(t *testing.T, open Opener[DevicesStore]) {
	t.Run("IDs", func(t *testing.T) { t.Parallel(); deviceIDs(t, open(t)) })
	t.Run("Lookups", func(t *testing.T) { t.Parallel(); deviceLookups(t, open(t)) })
	t.Run("Updates", func(t *testing.T) { t.Parallel(); deviceUpdates(t, open(t)) })
	t.Run("ReportedOnline", func(t *testing.T) { t.Parallel(); devicesReportedOnline(t, open(t)) })
	t.Run("Pairings", func(t *testing.T) { t.Parallel(); pairings(t, open(t)) })
	t.Run("PrunePairings", func(t *testing.T) { t.Parallel(); prunePairings(t, open(t)) })
	t.Run("Provision", func(t *testing.T) { t.Parallel(); provisionDevices(t, open(t)) })
	t.Run("EmailDeviceDeleted", func(t *testing.T) { t.Parallel(); emailDeviceDeleted(t, open(t)) })
	t.Run("EmailDeviceChecked", func(t *testing.T) { t.Parallel(); emailDeviceChecked(t, open(t)) })
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
		d, replaced, _, err := s.RegisterDevice(code, T0, fp, func(store.Pairing, *store.Device) (store.Device, error) {
			return store.Device{Status: store.DeviceActive, TokenHash: []byte{'t', byte(n)}}, nil
		})
		return d, replaced, err
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
	if _, err := s.UpdateDevice(b.ID, "x", func(d *store.Device) error { d.Name = "mine"; return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update by another company: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteDevice(a.ID, "x", T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Device("x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted device: %v, want ErrNotFound", err)
	}
	readded, _, err := register(a.ID, "x")
	if err != nil || readded.ID == first.ID || readded.ID == 0 {
		t.Fatalf("registration after a delete: id %d (%v), want a new one (not %d)", readded.ID, err, first.ID)
	}
	// The deleted registration's link finds nothing, though the fingerprint lives.
	if _, err := s.UpdateDeviceByID(a.ID, first.ID, func(d *store.Device) error { d.Name = "stale"; return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update by the deleted registration's id: %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteDevice(a.ID, "x", T0); err != nil {
		t.Fatal(err)
	}
	later, _, err := register(b.ID, "x")
	if err != nil || later.ID == first.ID || later.ID == readded.ID || later.CompanyID != b.ID {
		t.Fatalf("registration after the delete: %+v (%v), want a new id in company %d", later, err, b.ID)
	}
	if _, err := s.UpdateDeviceByID(a.ID, later.ID, func(*store.Device) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of b's device as company a: %v, want ErrNotFound", err)
	}
	if got, err := s.UpdateDeviceByID(b.ID, later.ID, func(d *store.Device) error { d.Name = "b's"; return nil }); err != nil || got.Name != "b's" || got.ID != later.ID {
		t.Fatalf("update by its own link: %+v (%v)", got, err)
	}
	if ds, err := s.CompanyDevices(a.ID); err != nil || len(ds) != 0 {
		t.Fatalf("company a's devices after the move: %d (%v), want none", len(ds), err)
	}
	if ds, err := s.CompanyDevices(b.ID); err != nil || len(ds) != 1 || ds[0].ID != later.ID {
		t.Fatalf("company b's devices: %+v (%v)", ds, err)
	}
}

// deviceLookups: a device is found by fingerprint (whatever its company),
// by its token's hash and in its company's list, in fingerprint order, as
// it was stored.
func deviceLookups(t *testing.T, s DevicesStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	want := map[string]store.Device{}
	for _, fp := range []string{"look-c", "look-a", "look-b"} {
		want[fp] = Device(t, s, a.ID, fp)
	}
	other := Device(t, s, b.ID, "look-other")
	for fp, w := range want {
		d, err := s.Device(fp)
		if err != nil || d.ID != w.ID || d.CompanyID != a.ID || d.Name != w.Name || d.SelectedSIM != "SIM1" || len(d.SIMs) != 2 ||
			d.SIMs[1].PhoneNumber != "+15550000002" || !d.CreatedAt.Equal(T0) || !bytes.Equal(d.TokenHash, w.TokenHash) {
			t.Fatalf("device %s: %+v (%v), want %+v", fp, d, err, w)
		}
		if d, err := s.DeviceByTokenHash(w.TokenHash); err != nil || d.ID != w.ID || d.Fingerprint != fp {
			t.Fatalf("device by the token of %s: %+v (%v)", fp, d, err)
		}
	}
	if _, err := s.Device("look-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown fingerprint: %v, want ErrNotFound", err)
	}
	if _, err := s.DeviceByTokenHash([]byte("no-such-token")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown token: %v, want ErrNotFound", err)
	}
	ds, err := s.CompanyDevices(a.ID)
	if err != nil || len(ds) != 3 || ds[0].Fingerprint != "look-a" || ds[1].Fingerprint != "look-b" || ds[2].Fingerprint != "look-c" {
		t.Fatalf("company devices: %+v (%v), want look-a, look-b, look-c", ds, err)
	}
	if ds, err := s.CompanyDevices(b.ID); err != nil || len(ds) != 1 || ds[0].ID != other.ID {
		t.Fatalf("the other company's devices: %+v (%v), want its one", ds, err)
	}
	c, _ := Company(t, s)
	if ds, err := s.CompanyDevices(c.ID); err != nil || len(ds) != 0 {
		t.Fatalf("a company without devices: %+v (%v), want none", ds, err)
	}
	if fs, err := s.DeviceFailures(a.ID, want["look-a"].ID); err != nil || len(fs) != 0 {
		t.Fatalf("failures of a new device: %+v (%v), want none", fs, err)
	}
}

// deviceUpdates: an update stores what fn makes of the device, but never
// its identity (id, fingerprint, company, token, creation time); fn's error
// is returned as it is and stores nothing; a device the company does not
// have is ErrNotFound, without calling fn.
func deviceUpdates(t *testing.T, s DevicesStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, "upd")
	battery := 42
	got, err := s.UpdateDevice(a.ID, "upd", func(x *store.Device) error {
		x.Name, x.Status, x.SMSPerMinute = "Renamed", store.DeviceDisabled, 6
		x.Health = &store.DeviceHealth{Battery: &battery, Presence: store.PresenceOffline}
		x.ID, x.Fingerprint, x.CompanyID, x.TokenHash, x.CreatedAt = 999, "other", b.ID, []byte("stolen"), T0.Add(time.Hour)
		return nil
	})
	if err != nil || got.Name != "Renamed" || got.Status != store.DeviceDisabled || got.SMSPerMinute != 6 {
		t.Fatalf("update: %+v (%v)", got, err)
	}
	if got.ID != d.ID || got.Fingerprint != "upd" || got.CompanyID != a.ID || !bytes.Equal(got.TokenHash, d.TokenHash) || !got.CreatedAt.Equal(T0) {
		t.Fatalf("update changed the identity: %+v, want that of %+v", got, d)
	}
	stored, err := s.CompanyDevice(a.ID, "upd")
	if err != nil || stored.Name != "Renamed" || stored.SMSPerMinute != 6 || stored.Health == nil || stored.Health.Battery == nil || *stored.Health.Battery != 42 || stored.ID != d.ID {
		t.Fatalf("stored after the update: %+v (%v)", stored, err)
	}
	if byToken, err := s.DeviceByTokenHash(d.TokenHash); err != nil || byToken.ID != d.ID {
		t.Fatalf("the token after the update: %+v (%v)", byToken, err)
	}
	refuse := errors.New("refused")
	if _, err := s.UpdateDeviceByID(a.ID, d.ID, func(x *store.Device) error { x.Name = "not stored"; return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("fn's error: %v, want it returned", err)
	}
	if stored, _ := s.Device("upd"); stored.Name != "Renamed" {
		t.Fatalf("a refused update stored %q", stored.Name)
	}
	called := false
	if _, err := s.UpdateDevice(b.ID, "upd", func(*store.Device) error { called = true; return nil }); !errors.Is(err, store.ErrNotFound) || called {
		t.Fatalf("another company's device: %v (fn called %v), want ErrNotFound", err, called)
	}
	if _, err := s.UpdateDeviceByID(b.ID, d.ID, func(*store.Device) error { called = true; return nil }); !errors.Is(err, store.ErrNotFound) || called {
		t.Fatalf("another company's device id: %v (fn called %v), want ErrNotFound", err, called)
	}
	if _, err := s.UpdateDevice(a.ID, "upd-none", func(*store.Device) error { called = true; return nil }); !errors.Is(err, store.ErrNotFound) || called {
		t.Fatalf("an unknown fingerprint: %v (fn called %v), want ErrNotFound", err, called)
	}
	got, err = s.UpdateDeviceByID(a.ID, d.ID, func(x *store.Device) error { x.Status = store.DeviceActive; return nil })
	if err != nil || got.Status != store.DeviceActive || got.Name != "Renamed" {
		t.Fatalf("update by id: %+v (%v)", got, err)
	}
}

// devicesReportedOnline lists the live devices of every company whose last
// presence is online, and no other.
func devicesReportedOnline(t *testing.T, s DevicesStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	presence := func(c uint64, fp, p string) store.Device {
		d := Device(t, s, c, fp)
		if p == "" {
			return d
		}
		d, err := s.UpdateDevice(c, fp, func(x *store.Device) error { x.Health = &store.DeviceHealth{Presence: p}; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	on1 := presence(a.ID, "on-1", store.PresenceOnline)
	on2 := presence(b.ID, "on-2", store.PresenceOnline)
	presence(a.ID, "off", store.PresenceOffline)
	presence(a.ID, "never", "")
	presence(b.ID, "gone", store.PresenceOnline)
	if _, err := s.DeleteDevice(b.ID, "gone", T0); err != nil {
		t.Fatal(err)
	}
	ds, err := s.DevicesReportedOnline()
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	for _, d := range ds {
		got[d.ID] = true
	}
	if len(ds) != 2 || !got[on1.ID] || !got[on2.ID] {
		t.Fatalf("reported online: %+v, want on-1 and on-2", ds)
	}
}

// pairings: a code is read back as stored; registering through it spends
// it (ErrPairingUsed after), an expired one is ErrTokenExpired, an unknown
// one ErrNotFound; a registration that fails leaves the code unspent.
func pairings(t *testing.T, s DevicesStore) {
	a, u := Company(t, s)
	code := []byte(fmt.Sprintf("code-%d", unique()))
	if err := s.PutPairing(code, store.Pairing{CompanyID: a.ID, UserID: u.ID, ExpiresAt: T0.Add(10 * time.Minute)}, T0); err != nil {
		t.Fatal(err)
	}
	p, err := s.Pairing(code)
	if err != nil || p.CompanyID != a.ID || p.UserID != u.ID || !p.ExpiresAt.Equal(T0.Add(10*time.Minute)) || !p.UsedAt.IsZero() {
		t.Fatalf("pairing: %+v (%v)", p, err)
	}
	if _, err := s.Pairing([]byte("no-such-code")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown code: %v, want ErrNotFound", err)
	}
	build := func(p store.Pairing, old *store.Device) (store.Device, error) {
		return store.Device{UserID: p.UserID, Status: store.DeviceActive, TokenHash: []byte(fmt.Sprintf("tok-%d", unique()))}, nil
	}
	refuse := errors.New("refused")
	if _, _, _, err := s.RegisterDevice(code, T0, "pair", func(store.Pairing, *store.Device) (store.Device, error) { return store.Device{}, refuse }); !errors.Is(err, refuse) {
		t.Fatalf("a failing build: %v, want its error", err)
	}
	if p, _ := s.Pairing(code); !p.UsedAt.IsZero() {
		t.Fatalf("a failed registration spent the code: %+v", p)
	}
	if _, err := s.Device("pair"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed registration stored the device: %v", err)
	}
	at := T0.Add(time.Minute)
	d, replaced, _, err := s.RegisterDevice(code, at, "pair", build)
	if err != nil || replaced || d.UserID != u.ID || d.CompanyID != a.ID || d.Fingerprint != "pair" {
		t.Fatalf("registration: %+v replaced %v (%v)", d, replaced, err)
	}
	if p, err := s.Pairing(code); err != nil || !p.UsedAt.Equal(at) {
		t.Fatalf("the spent code: %+v (%v), want used at %v", p, err, at)
	}
	if _, _, _, err := s.RegisterDevice(code, at, "pair-2", build); !errors.Is(err, store.ErrPairingUsed) {
		t.Fatalf("a spent code: %v, want ErrPairingUsed", err)
	}
	late := []byte(fmt.Sprintf("code-%d", unique()))
	if err := s.PutPairing(late, store.Pairing{CompanyID: a.ID, ExpiresAt: T0.Add(time.Minute)}, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.RegisterDevice(late, T0.Add(time.Minute), "pair-3", build); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("an expired code: %v, want ErrTokenExpired", err)
	}
	if _, _, _, err := s.RegisterDevice([]byte("no-such-code"), T0, "pair-4", build); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown code: %v, want ErrNotFound", err)
	}
	// Again within the company: build sees the old record, the id stays.
	again := []byte(fmt.Sprintf("code-%d", unique()))
	if err := s.PutPairing(again, store.Pairing{CompanyID: a.ID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
		t.Fatal(err)
	}
	var old *store.Device
	d2, replaced, _, err := s.RegisterDevice(again, T0.Add(time.Hour/2), "pair", func(p store.Pairing, o *store.Device) (store.Device, error) {
		old = o
		return build(p, o)
	})
	if err != nil || !replaced || d2.ID != d.ID || old == nil || old.ID != d.ID || !bytes.Equal(old.TokenHash, d.TokenHash) {
		t.Fatalf("re-registration: %+v replaced %v old %+v (%v)", d2, replaced, old, err)
	}
}

// prunePairings drops the codes that expired before the cutoff, used or
// not, and keeps the others.
func prunePairings(t *testing.T, s DevicesStore) {
	a, _ := Company(t, s)
	now := T0
	codes := map[string]store.Pairing{
		"old":      {CompanyID: a.ID, ExpiresAt: now.Add(-2 * time.Hour)},
		"old-used": {CompanyID: a.ID, ExpiresAt: now.Add(-2 * time.Hour), UsedAt: now.Add(-3 * time.Hour)},
		"recent":   {CompanyID: a.ID, ExpiresAt: now.Add(-30 * time.Minute)},
		"live":     {CompanyID: a.ID, ExpiresAt: now.Add(5 * time.Minute)},
	}
	for k, p := range codes {
		if err := s.PutPairing([]byte(k), p, now.Add(-3*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PrunePairings(now.Add(-time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	for k := range codes {
		_, err := s.Pairing([]byte(k))
		if gone := errors.Is(err, store.ErrNotFound); gone != (k == "old" || k == "old-used") {
			t.Errorf("code %s: gone %v (%v)", k, gone, err)
		}
	}
	if n, err := s.PrunePairings(now.Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned again: %d (%v), want 0", n, err)
	}
}

// provisionDevices stores a batch of devices at once, each with its own id
// and token; a fingerprint that lives already, or twice in the batch, is
// ErrConflict and nothing of the batch is stored.
func provisionDevices(t *testing.T, s DevicesStore) {
	a, _ := Company(t, s)
	dev := func(fp string) store.Device {
		return store.Device{Fingerprint: fp, CompanyID: a.ID, Name: fp, Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("tok-" + fp), CreatedAt: T0}
	}
	if err := s.ProvisionDevices([]store.Device{dev("prov-1"), dev("prov-2"), dev("prov-3")}); err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, fp := range []string{"prov-1", "prov-2", "prov-3"} {
		d, err := s.CompanyDevice(a.ID, fp)
		if err != nil || d.ID == 0 || ids[d.ID] || d.Name != fp || d.SelectedSIM != "BOTH" {
			t.Fatalf("provisioned %s: %+v (%v), want it with an id of its own", fp, d, err)
		}
		ids[d.ID] = true
		if byToken, err := s.DeviceByTokenHash([]byte("tok-" + fp)); err != nil || byToken.ID != d.ID {
			t.Fatalf("provisioned %s by its token: %+v (%v)", fp, byToken, err)
		}
	}
	if ds, err := s.CompanyDevices(a.ID); err != nil || len(ds) != 3 {
		t.Fatalf("company devices: %d (%v), want 3", len(ds), err)
	}
	for name, batch := range map[string][]store.Device{
		"a live fingerprint":  {dev("prov-4"), dev("prov-1")},
		"a fingerprint twice": {dev("prov-5"), dev("prov-5")},
	} {
		if err := s.ProvisionDevices(batch); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a batch with %s: %v, want ErrConflict", name, err)
		}
	}
	for _, fp := range []string{"prov-4", "prov-5"} {
		if _, err := s.Device(fp); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s of a refused batch: %v, want ErrNotFound", fp, err)
		}
	}
}

// DeviceSendsStore is what the suite of a device's sends calls.
type DeviceSendsStore interface {
	Base
	Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	DeviceFailures(companyID, deviceID uint64) ([]store.DeviceFailure, error)
	UpdateDevice(companyID uint64, fingerprint string, fn func(*store.Device) error) (store.Device, error)
}

// DeviceSends runs the suite of what a device's sends leave on it.
func DeviceSends(t *testing.T, open Opener[DeviceSendsStore]) {
	t.Run("DeleteFailsJobs", func(t *testing.T) { t.Parallel(); deleteFailsJobs(t, open(t)) })
	t.Run("Failures", func(t *testing.T) { t.Parallel(); deviceFailures(t, open(t)) })
	t.Run("SendsSeeDeviceChanges", func(t *testing.T) { t.Parallel(); sendsSeeDeviceChanges(t, open(t)) })
	t.Run("RegisteredSummary", func(t *testing.T) { t.Parallel(); registeredSummary(t, open(t)) })
}

// registeredSummary: a registration returns the device's summary as its
// transaction leaves it, so that its answer needs no read after the
// commit: none for a new device; for one registered again, which keeps
// its queue and failures, what QueueDepth and DeviceFailures read.
func registeredSummary(t *testing.T, s DeviceSendsStore) {
	a, _ := Company(t, s)
	register := func(fp string) (store.Device, bool, store.DeviceSummary) {
		t.Helper()
		code := []byte(fmt.Sprintf("code-%d", unique()))
		if err := s.PutPairing(code, store.Pairing{CompanyID: a.ID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
			t.Fatal(err)
		}
		d, replaced, sum, err := s.RegisterDevice(code, T0, fp, func(store.Pairing, *store.Device) (store.Device, error) {
			return store.Device{Status: store.DeviceActive, TokenHash: []byte(fmt.Sprintf("tok-%d", unique()))}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return d, replaced, sum
	}
	d, replaced, sum := register("sum-new")
	if replaced || sum.QueueDepth != 0 || len(sum.Failures) != 0 {
		t.Fatalf("a new device's registration: replaced %v, summary %+v; want none", replaced, sum)
	}
	failed := sendTo(t, s, a.ID, d.Fingerprint, "+15552000001", T0, time.Time{})
	if _, _, err := s.Transition(a.ID, d.ID, failed.UUID, store.MsgFailed, "no_service", "", T0); err != nil {
		t.Fatal(err)
	}
	sendTo(t, s, a.ID, d.Fingerprint, "+15552000002", T0, time.Time{})
	sendTo(t, s, a.ID, d.Fingerprint, "+15552000003", T0, time.Time{})
	failures, err := s.DeviceFailures(a.ID, d.ID)
	if err != nil || len(failures) != 1 {
		t.Fatalf("the device's failures: %+v (%v), want one", failures, err)
	}
	again, replaced, sum := register("sum-new")
	if !replaced || again.ID != d.ID || sum.QueueDepth != 2 || !sameFailures(sum.Failures, failures) {
		t.Fatalf("registered again: id %d replaced %v, summary %+v; want id %d, 2 waiting and the failure %+v", again.ID, replaced, sum, d.ID, failures)
	}
}

// sendsSeeDeviceChanges: each send reads its device as the last write
// left it, whatever a backend keeps between sends: the check is given the
// device with its SIM just changed; a device disabled refuses sends
// (ErrDeviceDisabled) and takes them again once enabled; a deleted one is
// ErrDeviceGone, and the fingerprint paired again is a new device that
// takes them.
func sendsSeeDeviceChanges(t *testing.T, s DeviceSendsStore) {
	a, _ := Company(t, s)
	fp := fmt.Sprintf("fp-%d", unique())
	first := Device(t, s, a.ID, fp)
	errSIM := errors.New("the device's SIM is not SIM1")
	var checked store.Device
	send := func() error {
		m := store.Message{UUID: fmt.Sprintf("sc-%d", unique()), CompanyID: a.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: "+15551000001", Text: "hi"}
		_, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return T0 }, func(d store.Device, slot string) error {
			checked = d
			if d.SelectedSIM != "BOTH" && d.SelectedSIM != slot {
				return errSIM
			}
			return nil
		}, nil)
		return err
	}
	update := func(fn func(*store.Device)) {
		t.Helper()
		if _, err := s.UpdateDevice(a.ID, fp, func(d *store.Device) error { fn(d); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := send(); err != nil {
		t.Fatalf("a send: %v", err)
	}
	update(func(d *store.Device) { d.SelectedSIM = "SIM2" })
	if err := send(); !errors.Is(err, errSIM) || checked.SelectedSIM != "SIM2" {
		t.Fatalf("a send after the device's SIM changed: %v, the check given SIM %q; want the check's refusal of SIM2", err, checked.SelectedSIM)
	}
	update(func(d *store.Device) { d.SelectedSIM = "BOTH" })
	if err := send(); err != nil {
		t.Fatalf("a send after the SIM changed back: %v", err)
	}
	update(func(d *store.Device) { d.Status = store.DeviceDisabled })
	if err := send(); !errors.Is(err, store.ErrDeviceDisabled) {
		t.Fatalf("a send after the device was disabled: %v, want ErrDeviceDisabled", err)
	}
	update(func(d *store.Device) { d.Status = store.DeviceActive })
	if err := send(); err != nil {
		t.Fatalf("a send after the device was enabled again: %v", err)
	}
	if _, err := s.DeleteDevice(a.ID, fp, T0); err != nil {
		t.Fatal(err)
	}
	if err := send(); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("a send after the device was deleted: %v, want ErrDeviceGone", err)
	}
	again := Device(t, s, a.ID, fp)
	if again.ID == first.ID {
		t.Fatalf("the fingerprint paired again has the deleted device's id %d", first.ID)
	}
	if err := send(); err != nil || checked.ID != again.ID {
		t.Fatalf("a send to the fingerprint paired again: %v, the check given device %d; want it sent by device %d", err, checked.ID, again.ID)
	}
}

// sendTo queues an SMS from the company's device to phone at at.
func sendTo(t testing.TB, s DeviceSendsStore, companyID uint64, fp, phone string, at time.Time, sendAt time.Time) store.Message {
	t.Helper()
	m := store.Message{UUID: fmt.Sprintf("ds-%d", unique()), CompanyID: companyID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: phone, Text: "hi", SendAt: sendAt}
	out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return at }, nil, nil)
	if err != nil {
		t.Fatalf("send from %s: %v", fp, err)
	}
	return out
}

// deleteFailsJobs: deleting a device fails its queued, scheduled and
// sending jobs (device_deleted) in the same transaction; its finished jobs
// and other devices' jobs stay as they are.
func deleteFailsJobs(t *testing.T, s DeviceSendsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "del-a")
	Device(t, s, a.ID, "del-b")
	queued := sendTo(t, s, a.ID, "del-a", "+15551000001", T0, time.Time{})
	scheduled := sendTo(t, s, a.ID, "del-a", "+15551000002", T0, T0.Add(time.Hour))
	sending := sendTo(t, s, a.ID, "del-a", "+15551000003", T0, time.Time{})
	sent := sendTo(t, s, a.ID, "del-a", "+15551000004", T0, time.Time{})
	other := sendTo(t, s, a.ID, "del-b", "+15551000001", T0, time.Time{})
	if _, _, err := s.Transition(a.ID, da.ID, sending.UUID, store.MsgSending, "", "", T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(a.ID, da.ID, sent.UUID, store.MsgSent, "", "", T0); err != nil {
		t.Fatal(err)
	}
	at := T0.Add(time.Minute)
	if _, err := s.DeleteDevice(a.ID, "del-a", at); err != nil {
		t.Fatal(err)
	}
	for _, m := range []store.Message{queued, scheduled, sending} {
		got, err := s.MessageByUUID(a.ID, m.UUID)
		if err != nil || got.Status != store.MsgFailed || got.Error != "device_deleted" || !got.UpdatedAt.Equal(at) {
			t.Fatalf("a job of the deleted device: %+v (%v), want failed (device_deleted)", got, err)
		}
	}
	if got, err := s.MessageByUUID(a.ID, sent.UUID); err != nil || got.Status != store.MsgSent {
		t.Fatalf("a sent job of the deleted device: %+v (%v), want it kept sent", got, err)
	}
	if got, err := s.MessageByUUID(a.ID, other.UUID); err != nil || got.Status != store.MsgQueued {
		t.Fatalf("another device's job: %+v (%v), want it queued", got, err)
	}
	if _, _, err := s.Transition(a.ID, da.ID, sending.UUID, store.MsgSent, "", "", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a report of the deleted device: %v, want ErrNotFound", err)
	}
}

// deviceFailures: a device's last store.MaxDeviceFailures failed or
// expired sends are kept, newest first; they are the device's own.
func deviceFailures(t *testing.T, s DeviceSendsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "fail-a")
	db := Device(t, s, a.ID, "fail-b")
	var uuids []string
	for i := range store.MaxDeviceFailures + 1 {
		at := T0.Add(time.Duration(i) * time.Minute)
		m := sendTo(t, s, a.ID, "fail-a", fmt.Sprintf("+1555200000%d", i), at, time.Time{})
		if _, _, err := s.Transition(a.ID, da.ID, m.UUID, store.MsgFailed, "no_service", "", at); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, m.UUID)
	}
	ok := sendTo(t, s, a.ID, "fail-a", "+15552000009", T0, time.Time{})
	if _, _, err := s.Transition(a.ID, da.ID, ok.UUID, store.MsgSent, "", "", T0); err != nil {
		t.Fatal(err)
	}
	fs, err := s.DeviceFailures(a.ID, da.ID)
	if err != nil || len(fs) != store.MaxDeviceFailures {
		t.Fatalf("failures: %+v (%v), want %d", fs, err, store.MaxDeviceFailures)
	}
	for i, f := range fs {
		want := uuids[len(uuids)-1-i]
		if f.QueueID != want || f.Status != store.MsgFailed || f.Error != "no_service" || f.Channel != "sms" {
			t.Fatalf("failure %d: %+v, want %s failed (no_service), newest first", i, f, want)
		}
	}
	if fs, err := s.DeviceFailures(a.ID, db.ID); err != nil || len(fs) != 0 {
		t.Fatalf("another device's failures: %+v (%v), want none", fs, err)
	}
	b, _ := Company(t, s)
	if fs, err := s.DeviceFailures(b.ID, da.ID); err != nil || len(fs) != 0 {
		t.Fatalf("the failures as another company: %+v (%v), want none", fs, err)
	}
}

// emailDeviceDeleted: deleting the company's e-mail device clears the
// setting in the same write; deleting another device leaves it, and
// another company's setting stays; registering the fingerprint
// again does not bring it back.
func emailDeviceDeleted(t *testing.T, s DevicesStore) {
	a, b := twoCompanies(t, s, "mail")
	Device(t, s, a.ID, "spare-a")
	set := func(companyID uint64, fp string) {
		t.Helper()
		if _, err := s.UpdateCompany(companyID, func(c *store.Company) error { c.EmailDevice = fp; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	emailDevice := func(companyID uint64) string {
		t.Helper()
		c, err := s.Company(companyID)
		if err != nil {
			t.Fatal(err)
		}
		return c.EmailDevice
	}
	set(a.ID, "mail-a")
	set(b.ID, "mail-b")
	if _, err := s.DeleteDevice(a.ID, "spare-a", T0); err != nil {
		t.Fatal(err)
	}
	if got := emailDevice(a.ID); got != "mail-a" {
		t.Fatalf("after deleting another device: e-mail device %q, want mail-a", got)
	}
	if _, err := s.DeleteDevice(a.ID, "mail-a", T0); err != nil {
		t.Fatal(err)
	}
	if got := emailDevice(a.ID); got != "" {
		t.Fatalf("after deleting it: e-mail device %q, want none", got)
	}
	if got := emailDevice(b.ID); got != "mail-b" {
		t.Fatalf("another company's: %q, want mail-b", got)
	}
	Device(t, s, a.ID, "mail-a")
	if got := emailDevice(a.ID); got != "" {
		t.Fatalf("after registering the fingerprint again: e-mail device %q, want none", got)
	}
}

// emailDeviceChecked: UpdateCompany refuses (ErrEmailDeviceGone) to set
// the e-mail device to a fingerprint that names no live device of the
// company (never paired, another company's, deleted) and writes nothing of
// that update; the company's own device is taken, kept by later updates,
// and cleared with "".
func emailDeviceChecked(t *testing.T, s DevicesStore) {
	a, b := twoCompanies(t, s, "mail")
	Device(t, s, a.ID, "gone-a")
	if _, err := s.DeleteDevice(a.ID, "gone-a", T0); err != nil {
		t.Fatal(err)
	}
	set := func(fp, name string) error {
		t.Helper()
		_, err := s.UpdateCompany(a.ID, func(c *store.Company) error { c.EmailDevice, c.Name = fp, name; return nil })
		return err
	}
	stored := func() store.Company {
		t.Helper()
		c, err := s.Company(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, fp := range []string{"nosuch", "mail-b", "gone-a"} {
		if err := set(fp, "Renamed"); !errors.Is(err, store.ErrEmailDeviceGone) {
			t.Fatalf("e-mail device %s: %v, want ErrEmailDeviceGone", fp, err)
		}
		if c := stored(); c.EmailDevice != "" || c.Name != a.Name {
			t.Fatalf("after refusing %s: e-mail device %q, name %q, want none and %q", fp, c.EmailDevice, c.Name, a.Name)
		}
	}
	if err := set("mail-a", "Renamed"); err != nil {
		t.Fatalf("the company's own device: %v", err)
	}
	if c := stored(); c.EmailDevice != "mail-a" || c.Name != "Renamed" {
		t.Fatalf("after setting mail-a: e-mail device %q, name %q, want mail-a and Renamed", c.EmailDevice, c.Name)
	}
	if err := set("mail-a", "Renamed again"); err != nil {
		t.Fatalf("an update keeping the e-mail device: %v", err)
	}
	if err := set("", "Renamed"); err != nil {
		t.Fatalf("clearing the e-mail device: %v", err)
	}
	if c := stored(); c.EmailDevice != "" {
		t.Fatalf("after clearing: e-mail device %q, want none", c.EmailDevice)
	}
	if c, err := s.Company(b.ID); err != nil || c.EmailDevice != "" {
		t.Fatalf("the other company: %+v (%v), want no e-mail device", c, err)
	}
}
