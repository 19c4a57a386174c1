package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// heldClock is a hub's clock whose next reading, once armed, waits until
// release is closed, closing hit as it starts to wait.
type heldClock struct {
	armed   atomic.Bool
	hit     chan struct{}
	release chan struct{}
}

func (c *heldClock) now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		close(c.hit)
		<-c.release
	}
	return time.Now()
}

// A link refused because its device was disabled gives the link it
// displaced its place back closed (4503): a kick (a send) that finds that
// link in its place writes no job to it. It was given its place back open
// and closed just after the hub's lock was released: a kick in between
// wrote a job to a disabled device's phone. The close's reading of the
// clock (the time the link went offline) is held: the kick then either
// went ahead or waits on the hub's lock.
func TestGiveBackClosesTheOldLinkBeforeAKickFindsIt(t *testing.T) {
	t.Parallel()
	clock := &heldClock{hit: make(chan struct{}), release: make(chan struct{})}
	released := false
	t.Cleanup(func() {
		if !released {
			close(clock.release)
		}
	})
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{PingInterval: time.Hour}, time.Now, nil, hubSetup{now: clock.now})
	first := r.connect(r.pair("pixel-1"))
	old := r.hub.lookup("pixel-1")
	// A newer link of the device registered, displacing the first, and its
	// second look found the device disabled and closed it.
	newer := &conn{hub: r.hub, dev: old.dev}
	newer.state.Store(linkClosing)
	r.hub.mu.Lock()
	r.hub.conns["pixel-1"] = newer
	r.hub.mu.Unlock()
	ctx := context.Background()
	// A job queued while the newer link held the place (its kick found
	// that link closed), then the device disabled.
	if _, _, err := r.sms.Send(ctx, sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "not for a disabled device"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.devices.Update(ctx, r.company, "pixel-1", devicePatchStatus(store.DeviceDisabled)); err != nil {
		t.Fatal(err)
	}
	clock.armed.Store(true)
	gave := make(chan struct{})
	go func() {
		r.hub.giveBack(newer, old, &refusal{code: proto.CloseDeviceGone, reason: "device disabled"})
		close(gave)
	}()
	select {
	case <-clock.hit:
	case <-time.After(poll.Timeout):
		t.Fatal("giveBack did not close the first link")
	}
	kicked := make(chan struct{})
	go func() {
		r.hub.Kick("pixel-1", r.id("pixel-1"))
		close(kicked)
	}()
	eventually(t, "the kick done, or held by the hub's lock", func() bool {
		select {
		case <-kicked:
			return true
		default:
		}
		if r.hub.mu.TryLock() {
			r.hub.mu.Unlock()
			return false
		}
		return true
	})
	released = true
	close(clock.release)
	<-gave
	<-kicked
	if got := closeCode(t, first); got != proto.CloseDeviceGone {
		t.Fatalf("first link: got close %d, want 4503", got)
	}
}

// A phone's second link, upgraded on the token its first link uses, is
// registered and under its second look when the device registers again
// (its token revoked): the re-registration's close (4501) finds the second
// link, which held the place; its look refuses it, 4501. The first link,
// on the same revoked token, must not get its place back open: it is
// closed with 4501 too. It got its place back and stayed online on a
// revoked token. (A first link on the device's current token keeps its
// place: TestStaleLinkDoesNotReplaceTheLiveOne.)
func TestRevokedWhileANewLinkIsCheckedClosesTheOldOneToo(t *testing.T) {
	t.Parallel()
	r, first, second, release := secondLinkUnderItsRecheck(t, beforeToken)
	r.pair("pixel-1") // registered again: token is revoked
	<-r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseBadToken, "token revoked")
	release()
	if got := closeCode(t, second); got != proto.CloseBadToken {
		t.Fatalf("second link: got close %d, want 4501", got)
	}
	eventually(t, "the device offline", func() bool { return !r.hub.Online("pixel-1", r.id("pixel-1")) })
	if got := closeAfterBacklog(t, first); got != proto.CloseBadToken {
		t.Fatalf("first link: got close %d, want 4501", got)
	}
	poll.Within(t, poll.Timeout, "the links unregistered", func() bool { return r.hub.Count() == 0 })
}

// A link the network cut stores the device's last seen as it ends
// (finish): a Disconnect made meanwhile (a request that disables the device
// and answers with it) waits for that write too. It answered at once: the
// link was unregistered before the write, or found cut, and a read right
// after the answer showed the time the link's hello stored.
func TestDisconnectOfACutLinkWaitsForItsLastSeen(t *testing.T) {
	t.Parallel()
	g := &gatedSeen{gate: make(chan struct{}), called: make(chan struct{})}
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{now: ahead,
		devices: func(d *device.Service) Devices { g.Devices = d; return g }})
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(g.gate)
		}
	})
	ws := r.connect(r.pair("pixel-1"))
	want := r.hub.LastSeen("pixel-1", r.id("pixel-1"))
	ws.CloseNow() // the network fails: no close handshake
	g.waitCalled(t)
	done := r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseDeviceGone, "device disabled")
	select {
	case <-done:
		t.Fatal("Disconnect's channel closed before the cut link's last seen was stored")
	default:
	}
	opened = true
	close(g.gate)
	select {
	case <-done:
	case <-time.After(poll.Timeout):
		t.Fatal("Disconnect's channel not closed once the last seen was stored")
	}
	if d, err := r.store.Device("pixel-1"); err != nil || d.LastSeenAt.Sub(want).Abs() > time.Millisecond {
		t.Fatalf("last seen when Disconnect's channel closed: %v (%v), want %v", d.LastSeenAt, err, want)
	}
}

// Three links of a device in a row: the second displaced the first, and a
// third displaced the second while the second was under its second look,
// which then refused it. The first has no place to get back (the third
// holds it) and the third's success closes the second only: the first was
// left open, unregistered, a link no job or close reached. It is closed
// 4009, as a newer link's success closes the one it displaced.
func TestGiveBackClosesTheFirstWhenAThirdHoldsThePlace(t *testing.T) {
	t.Parallel()
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{PingInterval: time.Hour}, time.Now, nil, hubSetup{})
	first := r.connect(r.pair("pixel-1"))
	old := r.hub.lookup("pixel-1")
	second := &conn{hub: r.hub, dev: old.dev}
	second.state.Store(linkClosing)
	third := &conn{hub: r.hub, dev: old.dev}
	third.state.Store(linkClosing)
	r.hub.mu.Lock()
	r.hub.conns["pixel-1"] = third
	r.hub.mu.Unlock()
	r.hub.giveBack(second, old, &refusal{code: proto.CloseBadToken, reason: "token revoked"})
	r.hub.mu.Lock()
	held := r.hub.conns["pixel-1"]
	delete(r.hub.conns, "pixel-1") // the third, made by hand, ends with the test
	r.hub.mu.Unlock()
	if held != third {
		t.Fatal("giveBack moved the third link out of its place")
	}
	if got := closeCode(t, first); got != proto.CloseReplaced {
		t.Fatalf("first link: got close %d, want 4009", got)
	}
}

// A phone's second link passes its second look (its token still good when
// read), and the device registers again before the link is welcomed: the
// re-registration's close (4501) finds the second link, which held the
// place. The first link, which it displaced, holds the revoked token too:
// it is closed with 4501, not 4009, which tells a phone another client
// took its place and to come back in 30 s.
func TestRevokedAfterANewLinksLookClosesTheOldOneAsRevoked(t *testing.T) {
	t.Parallel()
	r, first, second, release := secondLinkUnderItsRecheck(t, afterToken)
	r.pair("pixel-1") // registered again: the token both links hold is revoked
	<-r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseBadToken, "token revoked")
	release()
	bothClosed(t, r, second, first, proto.CloseBadToken)
}

// A stale link (on a token revoked after its hello was stored, before it
// was registered) displaces the device's live link, on the current token,
// and its re-check reads that token as the device's. The device registers
// again before the refusal gives the place back: the re-registration's
// close (4501) finds the stale link, which held the place. The live link's
// token is revoked now too: it must not get its place back open. It did:
// the refusal compared it with the token read at the look, and the phone
// stayed online on a revoked token.
func TestRevokedAgainWhileARefusedLinkGivesBackClosesTheOldOne(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	written, resume := make(chan struct{}), make(chan struct{})
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			close(resume)
		}
	})
	r, h, release := heldRigOver(t, afterDevice, func(d *device.Service) Devices {
		return helloStored{d, func(store.Device) {
			if armed.CompareAndSwap(true, false) {
				close(written)
				<-resume
			}
		}}
	})
	stale, _, err := r.dial(r.pair("pixel-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stale.CloseNow() })
	armed.Store(true)
	h.hold.Store(true)
	writeFrame(t, stale, proto.Hello{Protocol: 1, AppVersion: "test"})
	select {
	case <-written: // stored on its token, still the device's
	case <-time.After(poll.Timeout):
		t.Fatal("the stale link's hello was not stored")
	}
	live := r.connect(r.pair("pixel-1")) // the stale link's token is revoked
	resumed = true
	close(resume)
	select {
	case <-h.called: // the stale link displaced the live one; its look read the device
	case <-time.After(poll.Timeout):
		t.Fatal("the stale link's re-check did not get to its hold")
	}
	r.pair("pixel-1") // registered again: the live link's token is revoked
	<-r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseBadToken, "token revoked")
	release()
	bothClosed(t, r, stale, live, proto.CloseBadToken)
}
