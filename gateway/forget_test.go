package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/retention"
	"github.com/simrelay/simrelay/sms"
)

// remembered says whether the hub still holds the device's end time and
// queue place.
func (h *Hub) remembered(fingerprint string, deviceID uint64) (ended, dispatched bool, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ended = h.endedAt[deviceID]
	_, dispatched = h.dispatched[deviceID]
	return ended, dispatched, len(h.endedAt) + len(h.dispatched)
}

// TestHubForgetsDevicesOnceTheirJobsAreGone: what the hub keeps of a
// device whose link ended (when it ended, the queue place its links got
// to) is dropped once a job's life has passed since, and only then: it
// grew by an entry for every device ever linked since the start.
func TestHubForgetsDevicesOnceTheirJobsAreGone(t *testing.T) {
	t.Parallel()
	const life = 48 * time.Hour
	r := newRig(t, Config{JobLife: life})
	var skew atomic.Int64 // how far the hub's clock is ahead
	r.hub.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }

	token := r.pair("pixel-1")
	dev, err := r.devices.Get(context.Background(), r.company, "pixel-1")
	if err != nil {
		t.Fatal(err)
	}
	ws := r.connect(token)
	if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if s, ok := readFrame(t, ws).(*proto.Send); !ok {
		t.Fatalf("got %#v, want the send", s)
	}
	ws.CloseNow() // un-acked: the failover must not move it while it may be queued
	// Its end is recorded as it is unregistered, once its last seen is stored.
	eventually(t, "the link's end", func() bool { return r.hub.lookup("pixel-1") == nil })
	if ended, dispatched, _ := r.hub.remembered("pixel-1", dev.ID); !ended || !dispatched {
		t.Fatalf("ended %v, dispatched %v: want both remembered", ended, dispatched)
	}

	// Another device's link ends later, but within the life: both stay.
	other := r.pair("pixel-2")
	endLink := func() {
		t.Helper()
		ws := r.connect(other)
		ws.CloseNow()
		eventually(t, "pixel-2's link ends", func() bool { return r.hub.lookup("pixel-2") == nil })
	}
	skew.Store(int64(life - time.Minute))
	endLink()
	if ended, dispatched, _ := r.hub.remembered("pixel-1", dev.ID); !ended || !dispatched {
		t.Fatalf("ended %v, dispatched %v within the life: want both remembered", ended, dispatched)
	}

	// Past it, the next link to end takes them away.
	skew.Store(int64(life + retention.ScanEvery))
	endLink()
	ended, dispatched, n := r.hub.remembered("pixel-1", dev.ID)
	if ended || dispatched || n != 1 {
		t.Fatalf("ended %v, dispatched %v, %d entries: want pixel-1 forgotten, pixel-2's end kept", ended, dispatched, n)
	}
	if got := r.hub.OfflineSince("pixel-1", dev.ID); !got.IsZero() {
		t.Fatalf("OfflineSince = %v, want zero (offline since the start, as far as the failover is concerned)", got)
	}
}

// A device deleted after its link ended, and its fingerprint paired again,
// is a new device: it has no end time here until a link of its own ends.
// Before, it inherited the old device's, and the failover counted it
// offline since then rather than since the start, holding its jobs back by
// another device's link.
func TestPairedAgainInheritsNoEndTime(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ctx := context.Background()
	ws := r.connect(r.pair("again-1"))
	old, err := r.devices.Get(ctx, r.company, "again-1")
	if err != nil {
		t.Fatal(err)
	}
	ws.CloseNow()
	eventually(t, "the link's end", func() bool { return r.hub.lookup("again-1") == nil })
	if r.hub.OfflineSince("again-1", old.ID).IsZero() {
		t.Fatal("the old device's link ended, yet it has no end time")
	}
	if _, err := r.devices.Delete(ctx, r.company, "again-1"); err != nil {
		t.Fatal(err)
	}
	token := r.pair("again-1")
	dev, err := r.devices.Get(ctx, r.company, "again-1")
	if err != nil {
		t.Fatal(err)
	}
	if dev.ID == old.ID {
		t.Fatal("paired again after the delete, the device kept its id: the test shows nothing")
	}
	if got := r.hub.OfflineSince("again-1", dev.ID); !got.IsZero() {
		t.Fatalf("the device paired again is offline since %v, the old device's end; want no end time", got)
	}

	// Its own link's end is its own.
	ws = r.connect(token)
	if got := r.hub.OfflineSince("again-1", dev.ID); !got.IsZero() {
		t.Fatalf("online, yet offline since %v", got)
	}
	ws.CloseNow()
	eventually(t, "the new link's end", func() bool { return r.hub.lookup("again-1") == nil })
	if r.hub.OfflineSince("again-1", dev.ID).IsZero() {
		t.Fatal("the new device's link ended, yet it has no end time")
	}
}
