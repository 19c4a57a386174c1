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
	_, ended = h.endedAt[fingerprint]
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
	if got := r.hub.OfflineSince("pixel-1"); !got.IsZero() {
		t.Fatalf("OfflineSince = %v, want zero (offline since the start, as far as the failover is concerned)", got)
	}
}
