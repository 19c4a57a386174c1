package boltstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The writer keeps the devices it decoded for sends (deviceCache); every
// change of a device is still seen by the next send, and the cache holds
// at most its limit of devices, dropping one when full, not all.
func TestSendDeviceCache(t *testing.T) {
	t.Parallel()
	s, d, _, t0 := foldFixture(t, 0)
	errSIM := errors.New("wrong SIM")
	n := 0
	send := func() error {
		n++
		m := Message{UUID: fmt.Sprint("u-", n), CompanyID: d.CompanyID, Device: d.Fingerprint, Channel: "sms", Phone: "+15551234567", Text: "hi", SIMSlot: "SIM1"}
		_, _, err := s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return t0 }, func(dev Device, _ string) error {
			if dev.SelectedSIM != "BOTH" && dev.SelectedSIM != "SIM1" {
				return errSIM
			}
			return nil
		}, nil)
		return err
	}
	update := func(fn func(*Device)) {
		t.Helper()
		if _, err := s.UpdateDevice(d.CompanyID, d.Fingerprint, func(dev *Device) error { fn(dev); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.commit.devices.byFingerprint[d.Fingerprint]; !ok {
		t.Fatal("the send's device is not cached")
	}
	update(func(dev *Device) { dev.SelectedSIM = "SIM2" })
	if err := send(); !errors.Is(err, errSIM) {
		t.Fatalf("a send after the device's SIM changed: %v, want the check's refusal", err)
	}
	update(func(dev *Device) { dev.SelectedSIM = "BOTH" })
	if err := send(); err != nil {
		t.Fatal(err)
	}
	update(func(dev *Device) { dev.Status = DeviceDisabled })
	if err := send(); !errors.Is(err, ErrDeviceDisabled) {
		t.Fatalf("a send after the device was disabled: %v, want ErrDeviceDisabled", err)
	}
	update(func(dev *Device) { dev.Status = DeviceActive })
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteDevice(d.CompanyID, d.Fingerprint, t0); err != nil {
		t.Fatal(err)
	}
	if err := send(); !errors.Is(err, ErrDeviceGone) {
		t.Fatalf("a send after the device was deleted: %v, want ErrDeviceGone", err)
	}

	// A device written by a batch that rolled back is not taken for the
	// stored one.
	if err := s.ProvisionDevices([]Device{{Fingerprint: d.Fingerprint, CompanyID: d.CompanyID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t2")}}); err != nil {
		t.Fatal(err)
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if err := s.grouped(func(tx *bolt.Tx) error {
		var dev Device
		if err := getJSON(tx.Bucket(bucketDevices), []byte(d.Fingerprint), &dev); err != nil {
			return err
		}
		dev.SelectedSIM = "SIM2"
		if err := putJSON(tx.Bucket(bucketDevices), []byte(d.Fingerprint), dev); err != nil {
			return err
		}
		if _, err := s.commit.devices.live(tx, d.CompanyID, d.Fingerprint); err != nil {
			return err
		}
		return errors.New("roll back")
	}); err == nil {
		t.Fatal("the batch did not roll back")
	}
	if err := send(); err != nil {
		t.Fatalf("a send after a rolled-back change of its device: %v", err)
	}

	// The bound: a full cache drops one device for the next, so a fleet
	// larger than the cache still finds most of its devices there.
	const limit = 16
	if err := s.grouped(func(*bolt.Tx) error { s.commit.devices.limit = limit; return nil }); err != nil {
		t.Fatal(err)
	}
	devs := make([]Device, limit+8)
	for i := range devs {
		devs[i] = Device{Fingerprint: fmt.Sprint("many-", i), CompanyID: d.CompanyID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: fmt.Append(nil, "many-", i)}
	}
	if err := s.ProvisionDevices(devs); err != nil {
		t.Fatal(err)
	}
	if err := s.grouped(func(tx *bolt.Tx) error {
		for i, dev := range devs {
			if _, err := s.commit.devices.live(tx, d.CompanyID, dev.Fingerprint); err != nil {
				return err
			}
			n := len(s.commit.devices.byFingerprint)
			if n > limit {
				return fmt.Errorf("%d devices cached, more than %d", n, limit)
			}
			if i >= limit && n != limit {
				return fmt.Errorf("%d devices cached after %d sends' devices, want a full cache of %d", n, i+1, limit)
			}
			if _, ok := s.commit.devices.byFingerprint[dev.Fingerprint]; !ok {
				return fmt.Errorf("device %d is not cached after its send", i)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
