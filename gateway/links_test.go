package gateway

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// epochLog is a cluster's fencing as the hub sees it: every link claims the
// next epoch, and each Ended is recorded with whether the link was still
// registered on the hub at that moment.
type epochLog struct {
	hub   func() *Hub
	mu    sync.Mutex
	next  uint64
	ended []endedCall
}

type endedCall struct {
	epoch      uint64
	registered bool // the hub still held the link (its close handshake under way)
}

func (l *epochLog) Claim(store.Device) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	return l.next, nil
}

func (l *epochLog) Ended(dev store.Device, epoch uint64) {
	registered := l.hub().lookup(dev.Fingerprint) != nil
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, endedCall{epoch, registered})
}

func (l *epochLog) calls() []endedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]endedCall(nil), l.ended...)
}

// muteLinkInCluster is a rig on a cluster's fencing (epochLog) with one
// phone, "mute", linked and online, that reads nothing: a close handshake
// with it waits seconds. hangUp is linkMute's.
func muteLinkInCluster(t *testing.T) (r *rig, log *epochLog, hangUp func()) {
	t.Helper()
	log = &epochLog{}
	log.hub = func() *Hub { return r.hub }
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{epochs: log})
	hangUp = linkMute(t, r)
	// Online comes with the registration, the epoch a store read later: a
	// close before the claim tells the cluster only once unregistered.
	eventually(t, "its epoch claimed", func() bool { return len(r.hub.Links()) == 1 })
	return r, log, hangUp
}

// linkMute pairs the device "mute" and links a phone that says hello and
// then reads nothing (a tiny receive buffer): a close handshake with it
// waits seconds. It returns once the device is online, with hangUp, which
// drops the phone's connection: a test done with what happens during a
// close handshake ends it there, as a phone that gives up does, instead of
// waiting out the handshake's timeouts (closeHandshakeBound); the link
// ends through the same reader's end either way.
func linkMute(t *testing.T, r *rig) (hangUp func()) {
	t.Helper()
	ws, _, err := r.dial(r.pair("mute"), tinyReceiveBuffer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	writeFrame(t, ws, proto.Hello{Protocol: 1})
	eventually(t, "online", func() bool { return r.hub.Online("mute", r.id("mute")) })
	return func() { ws.CloseNow() }
}

// hangUpOnceStored waits for a Disconnect's channel, closed once the
// server's close stored the device's last seen, and then hangs up: a
// phone gone before that store is done has its link's end store the
// last seen beside it (storeSeen), and a test that counts the stores
// would count two.
func hangUpOnceStored(t *testing.T, stored <-chan struct{}, hangUp func()) {
	t.Helper()
	select {
	case <-stored:
	case <-time.After(poll.Timeout):
		t.Fatal("the server's close stored no last seen")
	}
	hangUp()
}

// A link the server closes ends in the cluster as the server decides, not
// once its close handshake is over, which waits seconds on a phone that
// does not read: other nodes see the device offline as this one does. The
// link's end when it is unregistered tells the cluster nothing more.
func TestServerCloseEndsTheLinkInTheClusterAtOnce(t *testing.T) {
	t.Parallel()
	r, log, hangUp := muteLinkInCluster(t)
	r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device deleted")
	eventually(t, "the cluster told of the link's end", func() bool { return len(log.calls()) > 0 })
	hangUp()
	eventually(t, "the link unregistered", func() bool { return r.hub.Count() == 0 })
	got := log.calls()
	if len(got) != 1 || got[0].epoch != 1 || !got[0].registered {
		t.Fatalf("Ended calls %+v: want one, for epoch 1, made while the close handshake was under way", got)
	}
}

// A link the server is closing is no longer among the node's links, though
// its close handshake keeps it registered: the cluster heard it ended, and
// the sweep, which reopens the rows of this node's links that another node
// ended, would reopen its row with nothing left to end it again.
func TestClosingLinkIsNotListed(t *testing.T) {
	t.Parallel()
	r, _, hangUp := muteLinkInCluster(t)
	r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device deleted")
	// The phone does not read: its close handshake keeps the link
	// registered for seconds.
	n, links := r.hub.Count(), r.hub.Links()
	if n != 1 {
		t.Fatalf("%d links registered right after the close, want the closing one still in its handshake", n)
	}
	if len(links) != 0 {
		t.Fatalf("links %+v while the server closes the only one", links)
	}
	hangUp()
	eventually(t, "the link unregistered", func() bool { return r.hub.Count() == 0 })
}

// stuckEpochs is a cluster whose database takes Ended and does not answer
// until release is closed.
type stuckEpochs struct {
	release chan struct{}
	mu      sync.Mutex
	next    uint64
}

func (s *stuckEpochs) Claim(store.Device) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return s.next, nil
}

func (s *stuckEpochs) Ended(store.Device, uint64) { <-s.release }

// The cluster hears of a link's end beside its close, not before it: the
// record is a database write, and a database that does not answer (the
// very cause of a close with 1013) must not hold up the phone's close
// frame.
func TestServerCloseDoesNotWaitForTheCluster(t *testing.T) {
	t.Parallel()
	epochs := &stuckEpochs{release: make(chan struct{})}
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{epochs: epochs})
	t.Cleanup(func() { close(epochs.release) }) // before the rig's own clean-up, which waits for the hub
	ws := r.connect(r.pair("pixel-1"))
	r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseDeviceGone, "device deleted")
	if code := closeAfterBacklog(t, ws); code != proto.CloseDeviceGone {
		t.Fatalf("close code %d, want %d", code, proto.CloseDeviceGone)
	}
}

// seenLog is the device service as the hub reaches it, recording each Seen
// with whether the hub still held the link then (its close handshake under
// way).
type seenLog struct {
	Devices
	hub   func() *Hub
	mu    sync.Mutex
	calls []seenCall
}

type seenCall struct {
	at         time.Time
	registered bool
}

func (l *seenLog) Seen(ctx context.Context, dev store.Device, at time.Time) error {
	registered := l.hub().lookup(dev.Fingerprint) != nil
	l.mu.Lock()
	l.calls = append(l.calls, seenCall{at, registered})
	l.mu.Unlock()
	return l.Devices.Seen(ctx, dev, at)
}

// muteLinkSeen is a rig whose device service is a seenLog, with "mute"
// linked (linkMute; hangUp is its). The hub's clock runs an hour ahead of
// the device service's, which stored the hello's time: the link's last
// seen is told from it.
func muteLinkSeen(t *testing.T) (r *rig, log *seenLog, hangUp func()) {
	t.Helper()
	log = &seenLog{}
	log.hub = func() *Hub { return r.hub }
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{now: ahead,
		devices: func(d *device.Service) Devices { log.Devices = d; return log }})
	return r, log, linkMute(t, r)
}

func (l *seenLog) seen() []seenCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenCall(nil), l.calls...)
}

// A link the server closes stores the device's last seen as the server
// decides, not once its close handshake is over, which waits seconds on a
// phone that does not read: the device is offline from that decision
// (Online, OfflineSince), and the API and the console show an offline
// device's stored last seen, which was its hello's until the handshake
// ended. What is stored is the link's last activity, as when a link ends.
func TestServerCloseStoresLastSeenAtOnce(t *testing.T) {
	t.Parallel()
	r, log, hangUp := muteLinkSeen(t)
	want := r.hub.LastSeen("mute", r.id("mute"))
	stored := r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device disabled")
	eventually(t, "the last seen stored", func() bool { return len(log.seen()) > 0 })
	if got := log.seen()[0]; !got.registered || !got.at.Equal(want) {
		t.Fatalf("first Seen %+v: want %v, stored while the close handshake was under way", got, want)
	}
	eventually(t, "the device's last seen is the link's", func() bool {
		d, err := r.store.Device("mute")
		return err == nil && d.LastSeenAt.Sub(want).Abs() <= time.Millisecond
	})
	hangUpOnceStored(t, stored, hangUp)
	eventually(t, "the link unregistered", func() bool { return r.hub.Count() == 0 })
	if d, _ := r.store.Device("mute"); d.LastSeenAt.Sub(want).Abs() > time.Millisecond {
		t.Errorf("last seen once the link ended: %v, want %v", d.LastSeenAt, want)
	}
	// The link's end stores nothing more: the device was written once,
	// as for a link that simply ends.
	if err := r.hub.Shutdown(context.Background()); err != nil { // its goroutines have ended
		t.Fatal(err)
	}
	if got := log.seen(); len(got) != 1 {
		t.Errorf("Seen calls %+v: want one, at the server's decision", got)
	}
}

// A pong (or frame) the link takes during its close handshake does not
// count as the device's activity: a ping sent before the server decided to
// close the link may have its pong come in while the close waits on the
// phone. The device's last seen stays the link's last activity before the
// decision, and the link's end stores nothing more; it stored the
// decision's time.
func TestPongDuringCloseHandshakeIsNotSeen(t *testing.T) {
	t.Parallel()
	r, log, hangUp := muteLinkSeen(t)
	c := r.hub.lookup("mute")
	want := r.hub.LastSeen("mute", r.id("mute"))
	stored := r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device disabled")
	// The phone does not read: the handshake waits seconds, and the pong
	// of a ping sent before the decision comes in meanwhile, taken as the
	// ping path takes it.
	c.touch()
	if got := c.seen(); !got.Equal(want) {
		t.Errorf("the link's last seen after a pong in its close handshake: %v, want %v", got, want)
	}
	hangUpOnceStored(t, stored, hangUp)
	eventually(t, "the link unregistered", func() bool { return r.hub.Count() == 0 })
	if err := r.hub.Shutdown(context.Background()); err != nil { // its goroutines have ended
		t.Fatal(err)
	}
	if got := log.seen(); len(got) != 1 || !got[0].at.Equal(want) {
		t.Errorf("Seen calls %+v: want one, of %v, at the server's decision", got, want)
	}
	if d, err := r.store.Device("mute"); err != nil || d.LastSeenAt.Sub(want).Abs() > time.Millisecond {
		t.Errorf("last seen once the link ended: %v (%v), want %v", d.LastSeenAt, err, want)
	}
}

// gatedSeen holds each Seen until the test opens gate, recording that it
// was called.
type gatedSeen struct {
	Devices
	gate   chan struct{}
	called chan struct{}
	once   sync.Once
}

func (g *gatedSeen) Seen(ctx context.Context, dev store.Device, at time.Time) error {
	g.once.Do(func() { close(g.called) })
	<-g.gate
	return g.Devices.Seen(ctx, dev, at)
}

// linkGated links the device "mute" to a hub whose device service holds
// every Seen until open is called (the test's cleanup calls it too), and
// whose clock runs an hour ahead of the device service's, which stored the
// hello's time: the link's last seen, want, is told from it.
func linkGated(t *testing.T) (r *rig, g *gatedSeen, want time.Time, open func()) {
	t.Helper()
	g = &gatedSeen{gate: make(chan struct{}), called: make(chan struct{})}
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{now: ahead,
		devices: func(d *device.Service) Devices { g.Devices = d; return g }})
	var once sync.Once
	open = func() { once.Do(func() { close(g.gate) }) }
	t.Cleanup(open)
	linkMute(t, r)
	return r, g, r.hub.LastSeen("mute", r.id("mute")), open
}

// waitCalled waits for the first Seen.
func (g *gatedSeen) waitCalled(t *testing.T) {
	t.Helper()
	select {
	case <-g.called:
	case <-time.After(poll.Timeout):
		t.Fatal("Disconnect stored no last seen")
	}
}

// Disconnect is how a request (a device disabled, deleted or paired again)
// ends the device's link, and the request answers next, once Disconnect's
// channel is closed: it is closed once the device's last seen is stored, so
// that a read right after the answer (GET /device/list, the console) shows
// the link's last activity. It stored it on a goroutine of its own: a read
// right away showed the time the link's hello stored.
func TestDisconnectReturnsWithLastSeenStored(t *testing.T) {
	t.Parallel()
	r, g, want, open := linkGated(t)
	done := r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device disabled")
	g.waitCalled(t)
	// The store's Seen is held at its gate: a channel closed now was closed
	// before the last seen was stored.
	select {
	case <-done:
		t.Fatal("Disconnect's channel closed before the device's last seen was stored")
	default:
	}
	open()
	<-done
	if d, err := r.store.Device("mute"); err != nil || d.LastSeenAt.Sub(want).Abs() > time.Millisecond {
		t.Fatalf("last seen when Disconnect's channel closed: %v (%v), want %v", d.LastSeenAt, err, want)
	}
}

// A second request that ends the device's link while the first one's close
// is storing the last seen (a device disabled and deleted at once, or a
// phone closed for flooding as it is disabled) answers once that last seen
// is stored, as the first does: its Disconnect found the link closing
// already and answered at once, before the store had it.
func TestDisconnectOfAClosingLinkWaitsForItsLastSeen(t *testing.T) {
	t.Parallel()
	r, g, want, open := linkGated(t)
	first := r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device disabled")
	g.waitCalled(t)
	second := r.hub.Disconnect("mute", r.id("mute"), proto.CloseDeviceGone, "device deleted")
	select {
	case <-second:
		t.Fatal("the second Disconnect's channel closed before the device's last seen was stored")
	default:
	}
	open()
	<-first
	<-second
	if d, err := r.store.Device("mute"); err != nil || d.LastSeenAt.Sub(want).Abs() > time.Millisecond {
		t.Fatalf("last seen when the second Disconnect's channel closed: %v (%v), want %v", d.LastSeenAt, err, want)
	}
}

// theLink is the hub's only listed link.
func theLink(t *testing.T, h *Hub) Link {
	t.Helper()
	links := h.Links()
	if len(links) != 1 {
		t.Fatalf("links %+v, want one", links)
	}
	return links[0]
}

// closeFrame reads until the link closes and returns its close frame.
func closeFrame(t *testing.T, ws *websocket.Conn) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("the link ended without a close frame: %v", err)
			}
			return ce
		}
	}
}

// DisconnectLink and FenceLink act on the link they name only (its device
// and epoch, as Links listed it): one of an older epoch, or of another
// device under the fingerprint (paired again after a delete: its epochs
// count from 1 again), leaves the device's link registered now open. The
// link named is closed as Disconnect and Fence close it: with the code and
// reason given, and with 4009 when a newer epoch is heard of.
func TestLinkNamedIsClosedOnlyWhileItIsTheDevicesLink(t *testing.T) {
	t.Parallel()
	log := &epochLog{}
	var r *rig
	log.hub = func() *Hub { return r.hub }
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{epochs: log})
	token := r.pair("named")
	first := r.connect(token)
	older := theLink(t, r.hub)
	second := r.connect(token)
	if ce := closeFrame(t, first); ce.Code != proto.CloseReplaced {
		t.Fatalf("the first link closed with %d, want %d", ce.Code, proto.CloseReplaced)
	}
	now := theLink(t, r.hub)
	if now.Epoch <= older.Epoch {
		t.Fatalf("epochs %d then %d: the test shows nothing", older.Epoch, now.Epoch)
	}
	other := now
	other.DeviceID++
	<-r.hub.DisconnectLink(older, proto.CloseDeviceGone, "device disabled")
	<-r.hub.DisconnectLink(other, proto.CloseDeviceGone, "device deleted")
	r.hub.FenceLink(older, now.Epoch+1)
	r.hub.FenceLink(other, now.Epoch+1)
	if links := r.hub.Links(); len(links) != 1 || links[0] != now {
		t.Fatalf("the device's links are %+v, want %+v open: a close named another link", links, now)
	}

	<-r.hub.DisconnectLink(now, proto.CloseDeviceGone, "device disabled")
	if ce := closeFrame(t, second); ce.Code != proto.CloseDeviceGone || ce.Reason != "device disabled" {
		t.Fatalf("the link named closed with %d %q, want %d %q", ce.Code, ce.Reason, proto.CloseDeviceGone, "device disabled")
	}
	third := r.connect(token)
	fenced := theLink(t, r.hub)
	r.hub.FenceLink(fenced, fenced.Epoch+1)
	if ce := closeFrame(t, third); ce.Code != proto.CloseReplaced || ce.Reason != replacedReason {
		t.Fatalf("the link fenced closed with %d %q, want %d %q", ce.Code, ce.Reason, proto.CloseReplaced, replacedReason)
	}
}
