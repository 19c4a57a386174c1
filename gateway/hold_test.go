package gateway

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// A phone's newer link, registered and under its second look, displaced
// the older one, which stays open until that look ends. HoldDevice holds
// the newer link, the one registered; the older one must not write a job
// while the device is held either: a failover moves every job above the
// dispatch mark it read, so a job the older link wrote meanwhile would go
// out from the phone and from the member it moved to. The older link's
// phone acks its one job (a window of 1) while the device is held, and
// the refill of its window read the next job and wrote it then. Once the
// hold ends, the older link is pumped again and gets the job.
func TestHoldDeviceHoldsTheLinkANewerOneDisplaced(t *testing.T) {
	t.Parallel()
	look := &lookHeld{at: beforeToken, called: make(chan struct{}), gate: make(chan struct{})}
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{MaxInflight: 1, PingInterval: time.Hour}, time.Now, nil, hubSetup{
		devices: func(d *device.Service) Devices { look.Devices = d; return look }})
	var once sync.Once
	release := func() { once.Do(func() { close(look.gate) }) }
	t.Cleanup(release)
	token := r.pair("pixel-1")
	older := r.connect(token)
	olderLink := r.hub.lookup("pixel-1")
	r.queue("pixel-1", "first", "second")
	first, ok := readFrame(t, older).(*proto.Send)
	if !ok || first.Message != "first" {
		t.Fatalf("got %#v, want the first job", first)
	}
	newer, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { newer.CloseNow() })
	look.helloHeld(t, newer) // registered, displacing the older link, which stays open

	// What the older link's phone reads, and whether the device was held
	// as it came.
	var holding atomic.Bool
	type got struct {
		frame proto.Frame
		held  bool
	}
	frames := make(chan got, 8)
	go func() {
		defer close(frames)
		for {
			_, data, err := older.Read(context.Background())
			if err != nil {
				return
			}
			f, _ := proto.Decode(data)
			frames <- got{f, holding.Load()}
		}
	}()
	id := r.id("pixel-1")
	err = r.hub.HoldDevice("pixel-1", id, func(uint64, bool) error {
		holding.Store(true)
		defer holding.Store(false)
		writeFrame(t, older, proto.Ack{ID: first.ID}) // frees the older link's window
		poll.Within(t, poll.Timeout, "the ack stored", func() bool {
			m, err := r.store.MessageByUUID(r.company, first.ID)
			return err == nil && m.Status == store.MsgSending
		})
		// The refill that follows the ack's commit reads the next job and
		// asks the hub to note its dispatch: the hold refuses it (the link
		// is not the one held) and keeps the link to pump again as it
		// ends. A refused pump writes nothing, so once the refusal is seen
		// no job goes out during the hold.
		poll.Until(t, "the displaced link's refill refused while the device is held", func() bool {
			select {
			case g := <-frames:
				if s, ok := g.frame.(*proto.Send); ok {
					t.Fatalf("the displaced link was written job %q while the device was held", s.Message)
				}
			default:
			}
			r.hub.mu.Lock()
			defer r.hub.mu.Unlock()
			hold := r.hub.holds[id]
			return hold != nil && slices.Contains(hold.refused, olderLink)
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Pumped again as the hold ended, the older link gets the job now
	// (the newer one is still under its look).
	deadline := time.After(poll.Timeout)
	for pumped := false; !pumped; {
		select {
		case g, open := <-frames:
			if !open {
				t.Fatal("the displaced link ended before it got the job")
			}
			s, ok := g.frame.(*proto.Send)
			if ok && g.held {
				t.Fatalf("the displaced link was written job %q while the device was held", s.Message)
			}
			pumped = ok && s.Message == "second"
		case <-deadline:
			t.Fatal("the displaced link was not pumped again once the hold ended")
		}
	}
	release() // the newer link passes its look and closes the older one (4009)
}
