package gateway

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/holdtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
)

// A settings change of a device whose link a failover holds (HoldDevice
// keeps the link's pump) returns at once, as a kick does: Pace (a request
// that changed the pace) and Refresh (a cluster's control, run one after
// another with the node's other controls) leave the pace and the pump to
// the link's own goroutine, which takes the pace the store holds last once
// the hold ends. Both set the pace and pumped on the caller's goroutine,
// under the pump's lock, and waited for the move.
func TestPaceAndRefreshDoNotWaitForAHeldDevice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(r *rig, id uint64)
	}{
		{"pace", func(r *rig, id uint64) { r.hub.Pace("pixel-1", id, 7) }},
		{"refresh", func(r *rig, id uint64) { r.hub.Refresh("pixel-1", id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{PingInterval: time.Hour}, time.Now, nil, hubSetup{})
			r.connect(r.pair("pixel-1"))
			id := r.id("pixel-1")
			kicksPumped(t, r.hub, "pixel-1")
			seven := 7
			if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &seven}); err != nil {
				t.Fatal(err)
			}
			let := holdtest.Hold(t, r.hub, "pixel-1", id)
			changed := make(chan struct{})
			go func() { defer close(changed); tc.change(r, id) }()
			select {
			case <-changed:
			case <-time.After(poll.Timeout):
				let()
				t.Fatalf("%s waited for the failover's hold of the device", tc.name)
			}
			let()
			kicksPumped(t, r.hub, "pixel-1")
			c := r.hub.lookup("pixel-1")
			c.pumpMu.Lock()
			pace := c.pace
			c.pumpMu.Unlock()
			if want := rate.Every(time.Minute / 7); pace == nil || pace.Limit() != want {
				t.Fatalf("the link's pace once the hold ended: %v, want %v (7 a minute)", pace, want)
			}
		})
	}
}
