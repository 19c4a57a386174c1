package gateway

import (
	"context"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A device deleted whose link is still open (the delete's disconnect has
// not run yet) and the device paired again under its fingerprint are two
// devices: the new one, linked nowhere, reads offline, with no last seen,
// its hold finds no live link, and a disconnect of it leaves the old
// device's link open; the old device's own disconnect closes it. Before,
// the hub answered and acted by fingerprint: the new device read online,
// seen at the old link's last activity, and its disconnect closed the old
// link, as the old device's would close the new device's link.
func TestTheDeviceNotTheFingerprint(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("paired-again-1"))
	old := r.id("paired-again-1")
	eventually(t, "online", func() bool { return r.hub.Online("paired-again-1", old) })
	if _, err := r.store.DeleteDevice(r.company, "paired-again-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	r.pair("paired-again-1")
	d, err := r.devices.Get(context.Background(), r.company, "paired-again-1")
	if err != nil || d.ID == old {
		t.Fatalf("paired again: device %d (%v), want a new one", d.ID, err)
	}
	if r.hub.Online(d.Fingerprint, d.ID) || !r.hub.LastSeen(d.Fingerprint, d.ID).IsZero() || len(r.hub.Presence(map[string]uint64{d.Fingerprint: d.ID})) != 0 {
		t.Error("the new device, linked nowhere, reads online")
	}
	if err := r.hub.HoldDevice(d.Fingerprint, d.ID, func(_ uint64, online bool) error {
		if online {
			t.Error("the hold of the new device found the old device's link live")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	<-r.hub.Disconnect(d.Fingerprint, d.ID, proto.CloseDeviceGone, "device disabled")
	if !r.hub.Online(d.Fingerprint, old) {
		t.Fatal("the new device's disconnect closed the old device's link")
	}
	<-r.hub.Disconnect(d.Fingerprint, old, proto.CloseDeviceGone, "device deleted")
	if code := closeCode(t, ws); code != proto.CloseDeviceGone {
		t.Errorf("the old device's link closed with %d, want %d", code, proto.CloseDeviceGone)
	}
}
