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
	reg, err := r.devices.Register(ctx, device.RegisterInput{PairingCode: p.Code, DeviceFingerprint: "pixel-1", SIMs: []store.SIM{{Slot: "SIM1"}}})
	if err != nil {
		t.Fatal(err)
	}
	live := r.connect(reg.Token)

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

// holdAt is where a link's re-check (its second look, once registered)
// is held.
type holdAt int

const (
	beforeToken holdAt = iota // before it looks at the link's token
	afterToken                // once it read the device by the token
	afterDevice               // once a revoked token's device lookup read the device
)

// lookHeld holds a link's re-check once hold is set, at its place (at),
// closing called as it gets there, until gate opens.
type lookHeld struct {
	Devices
	at     holdAt
	hold   atomic.Bool
	called chan struct{}
	gate   chan struct{}
}

func (h *lookHeld) held(at holdAt) {
	if at == h.at && h.hold.CompareAndSwap(true, false) {
		close(h.called)
		<-h.gate
	}
}

func (h *lookHeld) Authenticate(ctx context.Context, token string) (store.Device, error) {
	h.held(beforeToken)
	d, err := h.Devices.Authenticate(ctx, token)
	h.held(afterToken)
	return d, err
}

func (h *lookHeld) Get(ctx context.Context, companyID uint64, fingerprint string) (store.Device, error) {
	d, err := h.Devices.Get(ctx, companyID, fingerprint)
	h.held(afterDevice)
	return d, err
}

// helloStored is the device service whose Hello, once it stored a hello,
// runs after with the device as stored: a change made there (the device
// paired again, disabled, deleted) comes after the hello's write, which
// checks the token and the status, and before the link's second look.
type helloStored struct {
	Devices
	after func(dev store.Device)
}

func (h helloStored) Hello(ctx context.Context, dev store.Device, checked device.CheckedHello) (store.Device, error) {
	d, err := h.Devices.Hello(ctx, dev, checked)
	if err == nil {
		h.after(d)
	}
	return d, err
}

// helloHeld sends the link's hello with the re-check's hold set, and
// returns once the re-check is held.
func (h *lookHeld) helloHeld(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	h.hold.Store(true)
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test"})
	select {
	case <-h.called:
	case <-time.After(poll.Timeout):
		t.Fatal("the link's re-check did not get to its hold")
	}
}

// heldRig is a rig whose links' re-checks can be held at at (lookHeld);
// release lets a held one go on (and runs at the test's end if not called).
func heldRig(t *testing.T, at holdAt) (r *rig, h *lookHeld, release func()) {
	t.Helper()
	return heldRigOver(t, at, func(d *device.Service) Devices { return d })
}

// heldRigOver is heldRig whose lookHeld holds the device service as over
// gives it.
func heldRigOver(t *testing.T, at holdAt, over func(*device.Service) Devices) (r *rig, h *lookHeld, release func()) {
	t.Helper()
	h = &lookHeld{at: at, called: make(chan struct{}), gate: make(chan struct{})}
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{
		devices: func(d *device.Service) Devices { h.Devices = over(d); return h }})
	var once sync.Once
	release = func() { once.Do(func() { close(h.gate) }) }
	t.Cleanup(release)
	return r, h, release
}

// secondLinkUnderItsRecheck connects a phone's link, then a second on the
// same token whose second look (the re-check once registered) is held at
// at: release lets it go on (and runs at the test's end if not called).
func secondLinkUnderItsRecheck(t *testing.T, at holdAt) (r *rig, first, second *websocket.Conn, release func()) {
	t.Helper()
	r, h, release := heldRig(t, at)
	token := r.pair("pixel-1")
	first = r.connect(token)
	second, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.CloseNow() })
	h.helloHeld(t, second)
	return r, first, second, release
}

// A device disabled while its phone's second link was registered, not yet
// re-checked, has that link closed (the link registered then was the one
// Disconnect found); the re-check refuses it, and the first link, which
// it had displaced, must not get its place back: the device is disabled
// for it too. It got its place back and stayed online.
func TestDisabledWhileANewLinkIsCheckedClosesTheOldOneToo(t *testing.T) {
	t.Parallel()
	r, first, second, release := secondLinkUnderItsRecheck(t, beforeToken)
	ctx := context.Background()
	if _, err := r.devices.Update(ctx, r.company, "pixel-1", devicePatchStatus(store.DeviceDisabled)); err != nil {
		t.Fatal(err)
	}
	<-r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseDeviceGone, "device disabled")
	release()
	bothClosed(t, r, second, first, proto.CloseDeviceGone)
}

// bothClosed checks that a new link and the older one it displaced were
// both closed with code, and that no link of the device stays registered.
func bothClosed(t *testing.T, r *rig, newer, older *websocket.Conn, code websocket.StatusCode) {
	t.Helper()
	if got := closeCode(t, newer); got != code {
		t.Fatalf("new link: got close %d, want %d", got, code)
	}
	if got := closeAfterBacklog(t, older); got != code {
		t.Fatalf("older link: got close %d, want %d", got, code)
	}
	poll.Within(t, poll.Timeout, "the links unregistered", func() bool { return r.hub.Count() == 0 })
}
