package conformance

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// removalDeviceCompany: the read of a device's company for what its link
// does (DeviceCompany: an inbound's region, a hello's numbers) answers the
// company while the device is a live registration of it, disabled too;
// and store.ErrDeviceGone, never store.ErrNotFound, for a device deleted,
// an id the company never had (another company's), a company closing, one
// whose removal's first step took its devices and one removed whole. The
// callers tell the phone its device is gone on that error alone, so no
// other kind of missing record reads as a removal.
func removalDeviceCompany(t *testing.T, s RemovalStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	a, err := s.UpdateCompany(a.ID, func(c *store.Company) error { c.Region = "GB"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	d := Device(t, s, a.ID, fmt.Sprintf("devco-%d", unique()))
	deleted := Device(t, s, a.ID, fmt.Sprintf("devco-deleted-%d", unique()))
	disabled := Device(t, s, a.ID, fmt.Sprintf("devco-disabled-%d", unique()))
	ofB := Device(t, s, b.ID, fmt.Sprintf("devco-b-%d", unique()))
	live := func(what string, companyID, deviceID uint64) {
		t.Helper()
		c, err := s.DeviceCompany(companyID, deviceID)
		if err != nil || c.ID != companyID {
			t.Fatalf("%s: %+v (%v), want company %d", what, c, err, companyID)
		}
	}
	gone := func(what string, companyID, deviceID uint64) {
		t.Helper()
		c, err := s.DeviceCompany(companyID, deviceID)
		if !errors.Is(err, store.ErrDeviceGone) || errors.Is(err, store.ErrNotFound) || c.ID != 0 {
			t.Errorf("%s: %+v (%v), want store.ErrDeviceGone alone and no company", what, c, err)
		}
	}
	if c, err := s.DeviceCompany(a.ID, d.ID); err != nil || c.ID != a.ID || c.Region != "GB" || c.Name != a.Name {
		t.Fatalf("a live device's company: %+v (%v), want company %d with its region GB", c, err, a.ID)
	}
	if _, err := s.UpdateDeviceByID(a.ID, disabled.ID, func(d *store.Device) error { d.Status = store.DeviceDisabled; return nil }); err != nil {
		t.Fatal(err)
	}
	live("a disabled device (not gone: enabled again, it links)", a.ID, disabled.ID)
	if _, err := s.DeleteDevice(a.ID, deleted.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	gone("a deleted device", a.ID, deleted.ID)
	gone("another company's device id", a.ID, ofB.ID)
	gone("a device id under another company", b.ID, d.ID)
	live("the other company's own device", b.ID, ofB.ID)

	if _, err := s.MarkCompanyClosing(a.ID, T0.Add(time.Minute), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	gone("a device of a company closing", a.ID, d.ID)
	gone("a disabled device of a company closing", a.ID, disabled.ID)
	if r, err := s.RemoveCompanyStep(a.ID, 1); err != nil || r.Done {
		t.Fatalf("the removal's first step: %+v (%v), want not done", r, err)
	}
	gone("a device its company's removal took, the company's record still there", a.ID, d.ID)
	RemoveCompany(t, s, a.ID, 1000)
	gone("a device of a company removed", a.ID, d.ID)
	live("the other company's device after the removal", b.ID, ofB.ID)
}
