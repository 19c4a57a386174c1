package gateway

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// A window's worth of jobs that expired before the phone came back must not
// hide the fresh job behind them.
func TestExpiredBatchDoesNotHideLaterJobs(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	r := newRigAt(t, Config{MaxInflight: 4}, now)
	token := r.pair("pixel-1")
	send := func(text string) string {
		m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: text}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m.UUID
	}
	for i := range 6 {
		send(fmt.Sprint("stale ", i))
	}
	offset.Store(int64(25 * time.Hour)) // past the 24 h TTL, before the sweeper ran
	fresh := send("fresh")

	ws := r.connect(token)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.ID != fresh {
		t.Fatalf("got %#v, want the fresh job %s", s, fresh)
	}
}

// A link whose token was revoked while it waited to say hello is refused
// (4501) without knocking the device's live link off.
func TestStaleLinkDoesNotReplaceTheLiveOne(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	old := r.pair("pixel-1")
	stale, _, err := r.dial(old, nil) // upgraded on the old token, hello not yet sent
	if err != nil {
		t.Fatal(err)
	}
	defer stale.CloseNow()

	// The phone registers again and connects with its new token.
	ctx := context.Background()
	p, err := r.devices.CreatePairing(ctx, r.company, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, token, _, err := r.devices.Register(ctx, device.RegisterInput{PairingCode: p.Code, DeviceFingerprint: "pixel-1", SIMs: []store.SIM{{Slot: "SIM1"}}})
	if err != nil {
		t.Fatal(err)
	}
	live := r.connect(token)

	writeFrame(t, stale, proto.Hello{Protocol: 1, AppVersion: "test"})
	if got := closeCode(t, stale); got != proto.CloseBadToken {
		t.Fatalf("stale link: got close %d, want 4501", got)
	}
	// The live link still carries jobs.
	m, _, err := r.sms.Send(ctx, sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "still here"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := readFrame(t, live).(*proto.Send); !ok || s.ID != m.UUID {
		t.Fatalf("live link: got %#v, want the job %s", s, m.UUID)
	}
}

// recheckHeld holds the token's look once hold is set (the link's re-check
// once registered), recording that it was called, until gate opens.
type recheckHeld struct {
	Devices
	hold   atomic.Bool
	called chan struct{}
	gate   chan struct{}
}

func (h *recheckHeld) Authenticate(ctx context.Context, token string) (store.Device, error) {
	if h.hold.CompareAndSwap(true, false) {
		close(h.called)
		<-h.gate
	}
	return h.Devices.Authenticate(ctx, token)
}

// secondLinkUnderItsRecheck connects a phone's link, then a second on the
// same token whose second look (the re-check once registered) is held:
// release lets it go on (and runs at the test's end if not called).
func secondLinkUnderItsRecheck(t *testing.T) (r *rig, first, second *websocket.Conn, release func()) {
	t.Helper()
	h := &recheckHeld{called: make(chan struct{}), gate: make(chan struct{})}
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{
		devices: func(d *device.Service) Devices { h.Devices = d; return h }})
	var once sync.Once
	release = func() { once.Do(func() { close(h.gate) }) }
	t.Cleanup(release)
	token := r.pair("pixel-1")
	first = r.connect(token)
	second, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.CloseNow() })
	h.hold.Store(true)
	writeFrame(t, second, proto.Hello{Protocol: 1, AppVersion: "test"})
	select {
	case <-h.called:
	case <-time.After(poll.Timeout):
		t.Fatal("the second link was not re-checked")
	}
	return r, first, second, release
}

// A device disabled while its phone's second link was registered, not yet
// re-checked, has that link closed (the link registered then was the one
// Disconnect found); the re-check refuses it, and the first link, which
// it had displaced, must not get its place back: the device is disabled
// for it too. It got its place back and stayed online.
func TestDisabledWhileANewLinkIsCheckedClosesTheOldOneToo(t *testing.T) {
	t.Parallel()
	r, first, second, release := secondLinkUnderItsRecheck(t)
	ctx := context.Background()
	if _, err := r.devices.Update(ctx, r.company, "pixel-1", devicePatchStatus(store.DeviceDisabled)); err != nil {
		t.Fatal(err)
	}
	<-r.hub.Disconnect("pixel-1", proto.CloseDeviceGone, "device disabled")
	release()
	if got := closeCode(t, second); got != proto.CloseDeviceGone {
		t.Fatalf("second link: got close %d, want 4503", got)
	}
	if got := closeAfterBacklog(t, first); got != proto.CloseDeviceGone {
		t.Fatalf("first link: got close %d, want 4503", got)
	}
	poll.Within(t, poll.Timeout, "the device offline", func() bool { return r.hub.Count() == 0 })
}
