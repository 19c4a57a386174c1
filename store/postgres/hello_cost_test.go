package postgres

import (
	"testing"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestHelloCost: the write of an SMS phone's hello (UpdateDeviceWith)
// whose record says it holds no WhatsApp number or iMessage handle
// (Device.NoNumbers) makes the statements and round trips of any device
// write (UpdateDeviceByID): what a hello cost before a hello that
// announces none let an agent's numbers go; a new registration's record
// says so from the start. The first hello of a record written before the
// field makes one statement more, in one round trip more, and stores what
// it found.
func TestHelloCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "hello-cost")
	cost := func(write func() (store.Device, error)) (stmts, trips int64, dev store.Device) {
		t.Helper()
		n0, t0 := counted.n.Load(), counted.trips.Load()
		dev, err := write()
		if err != nil {
			t.Fatal(err)
		}
		return counted.n.Load() - n0, counted.trips.Load() - t0, dev
	}
	plain := func() (store.Device, error) {
		return s.UpdateDeviceByID(c.ID, d.ID, func(*store.Device) error { return nil })
	}
	hello := func() (store.Device, error) {
		return s.UpdateDeviceWith(c.ID, d.ID, func(*store.Device) ([]store.DeviceEvent, error) { return nil, nil })
	}
	hs, ht, fresh := cost(hello)
	if !fresh.NoNumbers {
		t.Errorf("the hello of a new registration: it holds numbers, want none")
	}
	// A record written before NoNumbers.
	if _, err := s.UpdateDeviceByID(c.ID, d.ID, func(d *store.Device) error { d.NoNumbers = false; return nil }); err != nil {
		t.Fatal(err)
	}
	ps, pt, _ := cost(plain)
	fs, ft, first := cost(hello)
	if !first.NoNumbers || fs != ps+1 || ft != pt+1 {
		t.Errorf("the first hello: %d statements in %d round trips (holds none: %v), want %d in %d and none", fs, ft, first.NoNumbers, ps+1, pt+1)
	}
	as, at, again := cost(hello)
	t.Logf("device write %d statements in %d round trips; hello %d in %d, of a record written before NoNumbers %d in %d, the next %d in %d", ps, pt, hs, ht, fs, ft, as, at)
	for _, h := range [][2]int64{{hs, ht}, {as, at}} {
		if h[0] != ps || h[1] != pt {
			t.Errorf("a hello of a phone whose record says it holds none: %d statements in %d round trips, want %d in %d, as a device write", h[0], h[1], ps, pt)
		}
	}
	if !again.NoNumbers {
		t.Errorf("the next hello of the record written before NoNumbers: it holds numbers, want none")
	}
}
