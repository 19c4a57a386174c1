package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

// phones serves the gateway's hub on loopback for phones of one company,
// paired through the real pairing flow.
type phones struct {
	t       *testing.T
	st      *postgres.Store
	hub     *gateway.Hub
	devices *device.Service
	company uint64
	url     string // ws://127.0.0.1:PORT
}

// servePhones serves g's hub (gatewayWith's) for a new company of st.
func servePhones(t *testing.T, st *postgres.Store, g *Gateway) *phones {
	t.Helper()
	hub := g.hub.(*gateway.Hub)
	srv := httptest.NewServer(hub)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
		srv.Close()
	})
	c, _ := conformance.Company(t, st)
	return &phones{t: t, st: st, hub: hub, devices: device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now), company: c.ID,
		url: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

// pair registers the fingerprint (again), answering the device and its token.
func (p *phones) pair(fingerprint string) (store.Device, string) {
	p.t.Helper()
	ctx := context.Background()
	code, err := p.devices.CreatePairing(ctx, p.company, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	reg, err := p.devices.Register(ctx, device.RegisterInput{PairingCode: code.Code, DeviceFingerprint: fingerprint, SIMs: []store.SIM{{Slot: "SIM1"}}})
	if err != nil {
		p.t.Fatal(err)
	}
	return reg.Device, reg.Token
}

// pairAgain deletes the device and pairs its fingerprint again, answering
// the new device (another id) and its token.
func (p *phones) pairAgain(old store.Device) (store.Device, string) {
	p.t.Helper()
	if _, err := p.st.DeleteDevice(old.CompanyID, old.Fingerprint, time.Now()); err != nil {
		p.t.Fatal(err)
	}
	d, token := p.pair(old.Fingerprint)
	if d.ID == old.ID {
		p.t.Fatal("paired again after the delete, the device kept its id: the test shows nothing")
	}
	return d, token
}

// link connects a phone with the token and returns once it is welcomed:
// its link is registered and its epoch claimed.
func (p *phones) link(token string) *websocket.Conn {
	p.t.Helper()
	return p.linkHello(token, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "SIM1", SIMs: []proto.SIM{{Slot: "SIM1"}}})
}

// linkHello is link with the hello given.
func (p *phones) linkHello(token string, h proto.Hello) *websocket.Conn {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, p.url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { ws.CloseNow() })
	hello, err := proto.Encode(h)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
		p.t.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			p.t.Fatalf("waiting for the welcome: %v", err)
		}
		if f, _ := proto.Decode(data); f != nil && f.FrameType() == proto.TypeWelcome {
			return ws
		}
	}
}

// closedWith reads the phone's link until it closes, answering its code.
func closedWith(t *testing.T, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			if code := websocket.CloseStatus(err); code != -1 || !errors.Is(err, context.DeadlineExceeded) {
				return code
			}
			t.Fatal("the link did not close")
		}
	}
}

// linkOf is the hub's listed link of the fingerprint; false when none.
func linkOf(hub *gateway.Hub, fingerprint string) (gateway.Link, bool) {
	for _, l := range hub.Links() {
		if l.Fingerprint == fingerprint {
			return l, true
		}
	}
	return gateway.Link{}, false
}

// goneThen is a link store that runs then once, right after a
// GoneDevices answered: what happens between the sweep's reads of the
// database and its closes.
type goneThen struct {
	LinkStore
	then func()
}

func (s *goneThen) GoneDevices(ids []uint64) (map[uint64]bool, error) {
	gone, err := s.LinkStore.GoneDevices(ids)
	if then := s.then; then != nil {
		s.then = nil
		then()
	}
	return gone, err
}

// hearCtl hands g the control message as heard from the bus; the heard
// queue runs it on g.runHeardOnce.
func hearCtl(t *testing.T, g *Gateway, c ctl) {
	t.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	g.heardCtl(Message{Topic: topicCtl, Data: data})
}

// setStatus disables or enables the device in the database alone, as a
// request on another node whose disconnect the bus lost does.
func setStatus(t *testing.T, st *postgres.Store, d store.Device, status string) {
	t.Helper()
	if _, err := st.UpdateDeviceWith(d.CompanyID, d.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Status = status
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A device disabled (the bus lost the disconnect), then enabled again and
// linked here again between the sweep's read of the devices gone and its
// close, keeps its new link: the sweep closes the link it read. Before, it
// closed the fingerprint's link, the new one, with 4503, and the phone
// stopped reconnecting, probing at most every 15 minutes.
func TestSweepLeavesALinkMadeAfterItsReadOfTheDevicesGone(t *testing.T) {
	t.Parallel()
	st, g, _ := gatewayOnNodes(t, 10*time.Second, 0, "a", "b")
	p := servePhones(t, st, g)
	d, token := p.pair("back-again")
	old := p.link(token)
	setStatus(t, st, d, store.DeviceDisabled)
	reads := &goneThen{LinkStore: g.st}
	g.st = reads
	var linked gateway.Link
	var again *websocket.Conn
	reads.then = func() {
		setStatus(t, st, d, store.DeviceActive)
		again = p.link(token)
		var ok bool
		if linked, ok = linkOf(p.hub, d.Fingerprint); !ok {
			t.Fatal("the new link is not listed")
		}
	}
	g.sweep()
	if l, ok := linkOf(p.hub, d.Fingerprint); !ok || l != linked {
		t.Fatalf("after the sweep the device's link is %+v (listed %v), want the new one %+v open", l, ok, linked)
	}
	if code := closedWith(t, old); code != proto.CloseReplaced {
		t.Errorf("the old link closed with %d, want %d (replaced by the new one)", code, proto.CloseReplaced)
	}

	// The link the sweep reads of a device disabled is closed, as before.
	setStatus(t, st, d, store.DeviceDisabled)
	g.sweep()
	if code := closedWith(t, again); code != proto.CloseDeviceGone {
		t.Errorf("the link of the device disabled closed with %d, want %d", code, proto.CloseDeviceGone)
	}
}

// A device deleted (its link here left open: the bus lost the disconnect)
// whose link here is no longer its newest, when the fingerprint is paired
// again and links here between the sweep's reads and its fence, keeps the
// new device's link: the sweep fences the link it read. Before, it fenced
// the fingerprint's link, the new device's, whose epochs count from 1
// again, and closed it with 4009.
func TestSweepFencesOnlyTheLinkItRead(t *testing.T) {
	t.Parallel()
	st, g, _ := gatewayOnNodes(t, 10*time.Second, 0, "a", "b")
	p := servePhones(t, st, g)
	d, token := p.pair("paired-again")
	old := p.link(token)
	// A newer link of the device on b, whose link signal the bus lost.
	if _, err := st.ClaimLink(d.ID, "b"); err != nil {
		t.Fatal(err)
	}
	reads := &goneThen{LinkStore: g.st}
	g.st = reads
	var linked gateway.Link
	reads.then = func() {
		again, token := p.pairAgain(d)
		p.link(token)
		var ok bool
		if linked, ok = linkOf(p.hub, d.Fingerprint); !ok || linked.DeviceID != again.ID {
			t.Fatalf("the new device's link is not listed: %+v", linked)
		}
	}
	g.sweep()
	if l, ok := linkOf(p.hub, d.Fingerprint); !ok || l != linked {
		t.Fatalf("after the sweep the fingerprint's link is %+v (listed %v), want the new device's %+v open", l, ok, linked)
	}
	if code := closedWith(t, old); code != proto.CloseReplaced {
		t.Errorf("the old link closed with %d, want %d (replaced by the new one)", code, proto.CloseReplaced)
	}
}

// A link signal names the fingerprint and the epoch, not the device: that
// of a link of a device deleted (one that registered as it was deleted),
// heard after its fingerprint was paired again and the new device linked
// here, leaves the new device's link open, its epochs being its own. Before,
// it closed the new link with 4009 (its epoch 1 older than the signal's),
// and the phone waited 30 s to link again, stopping after three. A signal
// of a newer link of the device itself closes it as before.
func TestLinkSignalOfAnotherDeviceLeavesTheLinkOpen(t *testing.T) {
	t.Parallel()
	st, g, _ := gatewayOnNodes(t, 10*time.Second, 0, "a", "b")
	p := servePhones(t, st, g)
	old, _ := p.pair("signalled")
	d, token := p.pairAgain(old)
	ws := p.link(token)
	linked, ok := linkOf(p.hub, d.Fingerprint)
	if !ok || linked.DeviceID != d.ID || linked.Epoch != 1 {
		t.Fatalf("the new device's link is %+v (listed %v), want its epoch 1", linked, ok)
	}
	signal := func(epoch uint64) {
		t.Helper()
		g.heardLink(Message{Topic: topicLink, Data: []byte(fmt.Sprintf("%s %d", d.Fingerprint, epoch))})
		g.runHeardOnce()
	}

	// The deleted device's link registers on b, at its second epoch.
	var e uint64
	for range 2 {
		var err error
		if e, err = st.ClaimLink(old.ID, "b"); err != nil {
			t.Fatal(err)
		}
	}
	signal(e)
	if l, ok := linkOf(p.hub, d.Fingerprint); !ok || l != linked {
		t.Fatalf("after the deleted device's link signal the fingerprint's link is %+v (listed %v), want the new device's %+v open", l, ok, linked)
	}

	// A newer link of the device itself on b closes it.
	if e, err := st.ClaimLink(d.ID, "b"); err != nil {
		t.Fatal(err)
	} else {
		signal(e)
	}
	if code := closedWith(t, ws); code != proto.CloseReplaced {
		t.Errorf("the device's link closed with %d after its newer link's signal, want %d", code, proto.CloseReplaced)
	}
}

// A disconnect heard from another node names the fingerprint, not the
// device or its token, and may come late (a bus that reconnected sends what
// it held): that of a device deleted, heard after its fingerprint was
// paired again and the new device linked here, leaves the new device's link
// open, as does that of a token replaced, heard after the phone linked with
// its new token. Before, the new device's link was closed with 4503 and its
// phone stopped reconnecting, probing at most every 15 minutes; the new
// token's with 4501, and its phone had to be paired again. A disconnect of
// the link's own device, changed as it says, closes it as before.
func TestHeardDisconnectOfAnotherRegistrationLeavesTheLinkOpen(t *testing.T) {
	t.Parallel()
	st, g, _ := gatewayOnNodes(t, 10*time.Second, 0, "a", "b")
	p := servePhones(t, st, g)
	heard := func(fp string, code int, reason string) {
		t.Helper()
		hearCtl(t, g, ctl{Op: "disconnect", Fingerprint: fp, Code: code, Reason: reason})
		g.runHeardOnce()
	}
	open := func(what string, want gateway.Link) {
		t.Helper()
		if l, ok := linkOf(p.hub, want.Fingerprint); !ok || l != want {
			t.Fatalf("%s: the fingerprint's link is %+v (listed %v), want %+v open", what, l, ok, want)
		}
	}

	// Deleted on b, paired again and linked here before b's disconnect
	// arrives.
	old, _ := p.pair("told-late")
	d, token := p.pairAgain(old)
	ws := p.link(token)
	linked, _ := linkOf(p.hub, d.Fingerprint)
	heard(d.Fingerprint, proto.CloseDeviceGone, "device deleted")
	open("after the deleted device's disconnect", linked)

	// Paired again over the device (a new token) on b: b's disconnect
	// closes the link on the old token with 4501.
	again, token2 := p.pair(d.Fingerprint)
	if again.ID != d.ID {
		t.Fatalf("paired over the device, it got id %d, want %d", again.ID, d.ID)
	}
	heard(d.Fingerprint, proto.CloseBadToken, "token replaced by a new registration")
	if code := closedWith(t, ws); code != proto.CloseBadToken {
		t.Fatalf("the link on the replaced token closed with %d, want %d", code, proto.CloseBadToken)
	}
	// The phone links with its new token before a late copy arrives.
	ws = p.link(token2)
	linked, _ = linkOf(p.hub, d.Fingerprint)
	heard(d.Fingerprint, proto.CloseBadToken, "token replaced by a new registration")
	open("after a late disconnect of the replaced token", linked)

	// Disabled on b: its disconnect closes the link.
	setStatus(t, st, again, store.DeviceDisabled)
	heard(d.Fingerprint, proto.CloseDeviceGone, "device disabled")
	if code := closedWith(t, ws); code != proto.CloseDeviceGone {
		t.Errorf("the link of the device disabled closed with %d, want %d", code, proto.CloseDeviceGone)
	}
}

// A settings change heard from another node names the fingerprint, not the
// device, and may come late: that of a device deleted, heard after its
// fingerprint was paired again and the new device linked here, gives the
// new device's link its own settings as stored, not the deleted device's.
// Before, the link got the deleted device's name and SIM (and pace), until
// its next link.
func TestHeardSettingsAreTheLinksOwnDevices(t *testing.T) {
	t.Parallel()
	st, g, _ := gatewayOnNodes(t, 10*time.Second, 0, "a", "b")
	p := servePhones(t, st, g)
	old, _ := p.pair("set-late")
	_, token := p.pairAgain(old)
	ws := p.link(token)
	d, err := p.devices.Get(context.Background(), p.company, old.Fingerprint) // as its hello stored it
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []ctl{
		{Op: "configure", Fingerprint: d.Fingerprint, Config: &proto.Config{SelectedSIM: "SIM2", DeviceName: "the deleted phone", Status: store.DeviceActive}},
		{Op: "pace", Fingerprint: d.Fingerprint, PerMinute: 1},
	} {
		hearCtl(t, g, c)
	}
	g.runHeardOnce()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the config frame: %v", err)
		}
		if f, _ := proto.Decode(data); f != nil && f.FrameType() == proto.TypeConfig {
			if cfg := f.(*proto.Config); cfg.DeviceName != d.Name || cfg.SelectedSIM != d.SelectedSIM {
				t.Fatalf("the link got settings %+v, want its own device's (name %q, SIM %q)", cfg, d.Name, d.SelectedSIM)
			}
			return
		}
	}
}
