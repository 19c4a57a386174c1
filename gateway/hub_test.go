package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
)

func TestHelloWelcomeAndPresence(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	token := r.pair("pixel-1")
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "2.0.1", SelectedSIM: "SIM2", SIMs: []proto.SIM{{Slot: "SIM2", Carrier: "Acme Mobile", PhoneNumber: "+1 555 010 2222"}}})
	w, ok := readFrame(t, ws).(*proto.Welcome)
	if !ok || w.DeviceFingerprint != "pixel-1" || w.PingIntervalSeconds != 45 || w.MaxInflight != 16 {
		t.Fatalf("got %#v, want the welcome of pixel-1 with ping 45 s and window 16", w)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", w.ServerTime); err != nil {
		t.Errorf("server_time %q: %v", w.ServerTime, err)
	}
	eventually(t, "online", func() bool { return r.hub.Online("pixel-1", r.id("pixel-1")) })
	if got := r.hub.Presence(r.ids("pixel-1", "absent")); len(got) != 1 || !got["pixel-1"].Equal(r.hub.LastSeen("pixel-1", r.id("pixel-1"))) {
		t.Errorf("presence of pixel-1 and an absent phone: %v, want pixel-1 alone, last seen %v", got, r.hub.LastSeen("pixel-1", r.id("pixel-1")))
	}
	d, _ := r.store.Device("pixel-1")
	if d.SelectedSIM != "SIM2" || d.AppVersion != "2.0.1" || len(d.SIMs) != 1 || d.SIMs[0].PhoneNumber != "+15550102222" {
		t.Errorf("hello was not recorded: %+v", d)
	}
	ws.Close(websocket.StatusNormalClosure, "bye")
	eventually(t, "offline", func() bool { return !r.hub.Online("pixel-1", r.id("pixel-1")) })
	if got := r.hub.Presence(r.ids("pixel-1")); len(got) != 0 {
		t.Errorf("presence after the link ended: %v, want none", got)
	}
	// The link's end stores when it was last seen, once it is unregistered.
	eventually(t, "last_seen_at stored when the link ended", func() bool {
		d, _ = r.store.Device("pixel-1")
		return !d.LastSeenAt.IsZero()
	})
}

func TestRefusedBeforeUpgrade(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	for _, token := range []string{"", "dt_unknown", "sk_someapikey"} {
		_, res, err := r.dial(token, nil)
		if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized || apiError(t, res) != "unauthorized" {
			t.Errorf("token %q: got %v, want HTTP 401 unauthorized and no socket", token, err)
		}
	}
	token := r.pair("pixel-1")
	disabled := "disabled"
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", devicePatchStatus(disabled)); err != nil {
		t.Fatal(err)
	}
	_, res, err := r.dial(token, nil)
	if err == nil || res.StatusCode != http.StatusForbidden || apiError(t, res) != "device_disabled" {
		t.Fatalf("disabled device: got %v, want HTTP 403 device_disabled", err)
	}
}

// TestHelloRules: each wrong first frame, and none in time, closes the
// link with its code. Only the case of no hello has the short hello
// timeout: the others, on a server with the default one, had it too, and a
// loaded machine that took longer than it between the dial and the first
// frame closed them with 4001 instead of their own code.
func TestHelloRules(t *testing.T) {
	t.Parallel()
	short := newRig(t, Config{HelloTimeout: 200 * time.Millisecond})
	plain := newRig(t, Config{})
	cases := []struct {
		name  string
		r     *rig
		first string
		want  websocket.StatusCode
	}{
		{"no hello in time", short, "", proto.CloseHelloTimeout},
		{"ack first", plain, `{"type":"ack","id":"x"}`, proto.CloseProtocolError},
		{"not JSON", plain, `hello`, proto.CloseProtocolError},
		{"protocol 2", plain, `{"type":"hello","protocol":2}`, proto.CloseUnsupportedVer},
		{"bad selected_sim", plain, `{"type":"hello","protocol":1,"selected_sim":"SIM3"}`, proto.CloseProtocolError},
	}
	tokens := map[*rig]string{short: short.pair("pixel-1"), plain: plain.pair("pixel-1")}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, _, err := c.r.dial(tokens[c.r], nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			if c.first != "" {
				writeRaw(t, ws, []byte(c.first))
			}
			if got := closeCode(t, ws); got != c.want {
				t.Fatalf("got close %d, want %d", got, c.want)
			}
		})
	}
}

func TestOversizedFrame(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	big := fmt.Sprintf(`{"type":"inbound","client_id":"1","channel":"sms","from":"+15550100000","message":%q}`, strings.Repeat("a", proto.MaxFrameBytes))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ws.Write(ctx, websocket.MessageText, []byte(big))
	if got := closeCode(t, ws); got != websocket.StatusMessageTooBig {
		t.Fatalf("got close %d, want 1009", got)
	}
}

func TestNewestConnectionWins(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	token := r.pair("pixel-1")
	first := r.connect(token)
	second := r.connect(token)
	if got := closeCode(t, first); got != proto.CloseReplaced {
		t.Fatalf("the first link: got close %d, want 4009", got)
	}
	// The second link is the device's now and carries its jobs.
	r.hub.Configure("pixel-1", r.id("pixel-1"), r.selectSIM("pixel-1", "SIM1"))
	if f, ok := readFrame(t, second).(*proto.Config); !ok || f.SelectedSIM != "SIM1" {
		t.Fatalf("got %#v, want the config push on the newest link", f)
	}
	if r.hub.Count() != 1 {
		t.Fatalf("got %d links, want 1", r.hub.Count())
	}
}

func TestDisconnectCodes(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	r.hub.Disconnect("pixel-1", r.id("pixel-1"), proto.CloseDeviceGone, "device deleted")
	if got := closeCode(t, ws); got != proto.CloseDeviceGone {
		t.Fatalf("got %d, want 4503", got)
	}
}

func TestUnknownFrameTypeKeepsTheLink(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	writeRaw(t, ws, []byte(`{"type":"teleport","to":"mars"}`))
	if e, ok := readFrame(t, ws).(*proto.Error); !ok || e.Code != "unknown_frame" {
		t.Fatalf("got %#v, want an unknown_frame error", e)
	}
	writeFrame(t, ws, proto.Inbound{ClientID: "c1", Channel: "sms", From: "+15550100000", Message: "still here", ReceivedAt: "2026-11-22T10:00:00.000Z"})
	if a, ok := readFrame(t, ws).(*proto.InboundAck); !ok || a.ClientID != "c1" || a.ID == 0 || a.UUID == "" {
		t.Fatalf("got %#v, want the inbound_ack of c1", a)
	}
}

func TestFloodIsClosed(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{FrameRate: 5, FrameBurst: 10})
	ws := r.connect(r.pair("pixel-1"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		for range 100 {
			if ws.Write(ctx, websocket.MessageText, []byte(`{"type":"teleport"}`)) != nil {
				return
			}
		}
	}()
	if got := closeCode(t, ws); got != proto.CloseFlood {
		t.Fatalf("got %d, want 4029", got)
	}
}

// stallWriter queues for the device's link a frame larger than what the
// socket's buffers hold (tinySendBuffer and tinyReceiveBuffer: about
// 13 KB) and waits until the link's writer took it: from then on, until
// the phone reads, the writer is stuck in the middle of that frame, and
// every frame after it, a close frame too, waits behind it.
func stallWriter(t *testing.T, r *rig, fingerprint string) {
	t.Helper()
	c := r.hub.lookup(fingerprint)
	if c == nil {
		t.Fatalf("%s has no link", fingerprint)
	}
	// Under coder/websocket's read limit (32 KiB), so that a phone that
	// reads again gets it whole.
	c.send(proto.Config{SelectedSIM: "SIM1", DeviceName: strings.Repeat("s", 30000), Status: "active"})
	eventually(t, "the writer took the large frame", func() bool { q, _ := queuedBytes(r.hub, fingerprint); return q == 0 })
}

// slowReaderRig serves a hub whose links queue 8 frames, flood limits
// aside, over socket buffers a large frame overflows (tinySendBuffer,
// tinyReceiveBuffer), and links the phone "slow" to it, its hello sent.
func slowReaderRig(t *testing.T) (*rig, *websocket.Conn) {
	t.Helper()
	r := newRigServed(t, Config{QueueLen: 8, FrameRate: 1e6, FrameBurst: 1e6, SendBuffer: tinySendBuffer}, time.Now, storetest.Options{}, nil)
	slow, _, err := r.dial(r.pair("slow"), tinyReceiveBuffer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.CloseNow() })
	writeFrame(t, slow, proto.Hello{Protocol: 1})
	return r, slow
}

// overflowQueue pushes settings to the device, its writer stalled
// (stallWriter), until its queue overflows and the hub ends its link, a
// thousand pushes at most.
func overflowQueue(r *rig, fingerprint string, id uint64) {
	for i := 0; i < 1000 && r.hub.Online(fingerprint, id); i++ {
		r.hub.Configure(fingerprint, id, proto.Config{SelectedSIM: "SIM1", DeviceName: fingerprint, Status: "active"})
	}
}

func TestSlowReaderIsClosedOthersFlow(t *testing.T) {
	t.Parallel()
	r, slow := slowReaderRig(t)
	fast := r.connect(r.pair("fast"))
	eventually(t, "both online", func() bool { return r.hub.Online("slow", r.id("slow")) && r.hub.Online("fast", r.id("fast")) })

	// The slow phone stopped reading with a frame on its way: the settings
	// pushed to it pile up behind that write until the queue overflows.
	// (Error answers to frames it sends unasked would make that a flood,
	// 4029.) The device's id is read once: a read for each push (two round
	// trips on PostgreSQL) made the loop long.
	stallWriter(t, r, "slow")
	// The fast phone never notices.
	r.hub.Configure("fast", r.id("fast"), r.selectSIM("fast", "SIM2"))
	if f, ok := readFrame(t, fast).(*proto.Config); !ok || f.SelectedSIM != "SIM2" {
		t.Fatalf("got %#v on the fast phone, want its config push", f)
	}
	id := r.id("slow")
	overflowQueue(r, "slow", id)
	eventually(t, "the slow phone closed", func() bool { return !r.hub.Online("slow", id) })
	// The close frame waits behind the stuck write, and the server waits
	// 5 s for it to go out before it ends the link without it (PROTOCOL.md
	// section 6; TestSlowReaderReadingTooLateSeesNoCloseFrame): the phone
	// reads again now. Behind the backlog, what it reads is its close: 4008.
	if got := closeAfterBacklog(t, slow); got != proto.CloseTooSlow {
		t.Fatalf("slow phone: got close %d, want 4008", got)
	}
}

// A phone that reads nothing for longer than the server waits for its close
// frame to go out (5 s, the WebSocket library's bound) never gets one: the
// server ends the connection in the middle of the frame its write was stuck
// on, and the phone, reading again, finds that frame cut short and the
// connection's end, an abnormal closure (PROTOCOL.md section 6).
func TestSlowReaderReadingTooLateSeesNoCloseFrame(t *testing.T) {
	t.Parallel()
	r, slow := slowReaderRig(t)
	id := r.id("slow")
	eventually(t, "online", func() bool { return r.hub.Online("slow", id) })
	stallWriter(t, r, "slow")
	overflowQueue(r, "slow", id)
	r.serverClosed("slow", proto.CloseTooSlow)
	// The link is gone once the server gave up its close frame: the link's
	// reader ends with the connection.
	poll.Within(t, poll.Timeout+closeHandshakeBound, "the server ends the link", func() bool { return r.hub.Count() == 0 })
	if err := readToEnd(t, slow); errors.As(err, new(websocket.CloseError)) {
		t.Fatalf("the phone that read too late got a close frame (%v), want the connection's end without one", err)
	}
}

// readToEnd reads frames until the link ends and returns the error that
// ended it; it fails the test if the link is still open after 20 s.
func readToEnd(t *testing.T, ws *websocket.Conn) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the link did not end: %v", err)
			}
			return err
		}
	}
}

// A write that waits WriteTimeout for a phone that stopped reading ends the
// link, though the queue behind it has room, and without a close frame
// (PROTOCOL.md section 6).
func TestStuckWriteEndsTheLink(t *testing.T) {
	t.Parallel()
	r := newRigServed(t, Config{WriteTimeout: 200 * time.Millisecond, SendBuffer: tinySendBuffer}, time.Now, storetest.Options{}, nil)
	stuck, _, err := r.dial(r.pair("stuck"), tinyReceiveBuffer())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.CloseNow()
	writeFrame(t, stuck, proto.Hello{Protocol: 1})
	id := r.id("stuck")
	eventually(t, "online", func() bool { return r.hub.Online("stuck", id) })
	// One frame the socket cannot take whole while the phone reads nothing;
	// nothing queued behind it.
	stallWriter(t, r, "stuck")
	eventually(t, "the stuck link ended", func() bool { return !r.hub.Online("stuck", id) })
	if !strings.Contains(r.logs.String(), "phone link dropped by the server") || strings.Contains(r.logs.String(), "phone link closed by the server") {
		t.Errorf("the hub's log: %s\nwant the link dropped for its stuck write, not closed", r.logs.String())
	}
	// What the phone reads, once it reads again, is what the socket held,
	// the stuck frame cut short, and the connection's end: no close frame.
	if err := readToEnd(t, stuck); errors.As(err, new(websocket.CloseError)) {
		t.Fatalf("the stuck phone got a close frame (%v), want the connection's end without one", err)
	}
}

func TestShutdownTellsPhonesAndLeavesNoGoroutine(t *testing.T) {
	r := newRig(t, Config{PingInterval: 50 * time.Millisecond})
	var tokens []string
	for i := range 5 {
		tokens = append(tokens, r.pair(fmt.Sprintf("pixel-%d", i)))
	}
	// Counted once the store is open and has served the pairings: what it
	// keeps running (PostgreSQL's pool) stays until the test ends.
	base := runtime.NumGoroutine()
	var links []*websocket.Conn
	for _, token := range tokens {
		links = append(links, r.connect(token))
	}
	// Keep the links read so that they answer pings while the hub runs.
	codes := make(chan websocket.StatusCode, len(links))
	for _, ws := range links {
		go func() { codes <- closeCode(t, ws) }()
	}
	eventually(t, "all online", func() bool { return r.hub.Count() == 5 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for range links {
		if got := <-codes; got != proto.CloseRestarting {
			t.Errorf("got close %d, want 4012", got)
		}
	}
	_, res, err := r.dial(r.pair("late"), nil)
	if err == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a link after shutdown: got %v, want HTTP 503", err)
	}
	http.DefaultClient.CloseIdleConnections()
	eventually(t, "goroutines back to the start", func() bool { return runtime.NumGoroutine() <= base+2 })
}

func TestSilentPhoneGoesOffline(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{PingInterval: 50 * time.Millisecond, PongTimeout: 100 * time.Millisecond})
	ws := r.connect(r.pair("pixel-1"))
	defer ws.CloseNow()
	// Nothing reads this link, so its pings go unanswered.
	eventually(t, "offline after unanswered pings", func() bool { return !r.hub.Online("pixel-1", r.id("pixel-1")) })
}

// pacedLink is a rig whose device pixel-1 sends one SMS a minute, linked,
// with n sends queued to it (m0, m1, ...).
func pacedLink(t *testing.T, n int) (*rig, *websocket.Conn) {
	t.Helper()
	r := newRig(t, Config{})
	token := r.pair("pixel-1")
	one := 1
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &one}); err != nil {
		t.Fatal(err)
	}
	ws := r.connect(token)
	for i := range n {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: fmt.Sprint("m", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return r, ws
}

func TestPacingSpacesSends(t *testing.T) {
	t.Parallel()
	r, ws := pacedLink(t, 2)
	first, ok := readFrame(t, ws).(*proto.Send)
	if !ok || first.Message != "m0" {
		t.Fatalf("got %#v, want m0 at once", first)
	}
	writeFrame(t, ws, proto.Ack{ID: first.ID})
	// At one a minute, the second waits: a probe's answer comes first.
	writeFrame(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readFrame(t, ws).(*proto.InboundAck); !ok {
		t.Fatalf("got %#v, want the probe's ack before the paced send", f)
	}
	// Lifting the pace lets it go at once.
	r.pace("pixel-1", 0)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m1" {
		t.Fatalf("got %#v, want m1 once pacing is off", s)
	}
}

// Sends queued while a paced device's new link is under its second look
// (registered, not yet welcomed) are pumped to it behind the welcome: they
// are paced too. The link took its pace only after that look, so every job
// queued meanwhile went out at once, up to the whole window.
func TestPacingHoldsForSendsQueuedBeforeTheWelcome(t *testing.T) {
	t.Parallel()
	r, h, release := heldRig(t, beforeToken)
	token := r.pair("pixel-1")
	one := 1
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &one}); err != nil {
		t.Fatal(err)
	}
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	h.helloHeld(t, ws)
	for i := range 2 {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: fmt.Sprint("m", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	release()
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want the welcome", w)
	}
	first, ok := readFrame(t, ws).(*proto.Send)
	if !ok || first.Message != "m0" {
		t.Fatalf("got %#v, want m0 at once", first)
	}
	writeFrame(t, ws, proto.Ack{ID: first.ID})
	// At one a minute, the second waits: a probe's answer comes first.
	writeFrame(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readFrame(t, ws).(*proto.InboundAck); !ok {
		t.Fatalf("got %#v, want the probe's ack before the paced send", f)
	}
}

// A pace raised while a send waits for the old one: the send after it goes
// by the new pace, not when the old pace's wait (the rest of a minute) ends.
func TestPacingRaisedSpacesByTheNewPace(t *testing.T) {
	t.Parallel()
	r, ws := pacedLink(t, 3)
	for i := range 3 {
		s, ok := readFrame(t, ws).(*proto.Send)
		if !ok || s.Message != fmt.Sprint("m", i) {
			t.Fatalf("got %#v, want m%d", s, i)
		}
		writeFrame(t, ws, proto.Ack{ID: s.ID})
		if i == 0 {
			// m1 waits the minute of one a minute; 600 a minute lets it
			// go at once and m2 a tenth of a second after.
			r.pace("pixel-1", 600)
		}
	}
}

// A pace changed just after a send spaces the next from that send: at 2 a
// minute it waits about 30 s more. A new limiter, full, let it go at once.
func TestPacingChangedDoesNotSendAtOnce(t *testing.T) {
	t.Parallel()
	r, ws := pacedLink(t, 2)
	first, ok := readFrame(t, ws).(*proto.Send)
	if !ok || first.Message != "m0" {
		t.Fatalf("got %#v, want m0 at once", first)
	}
	writeFrame(t, ws, proto.Ack{ID: first.ID})
	r.pace("pixel-1", 2)
	// m1 waits the new pace's interval from m0: a probe's answer comes first.
	writeFrame(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readFrame(t, ws).(*proto.InboundAck); !ok {
		t.Fatalf("got %#v, want the probe's ack before the paced send", f)
	}
	r.pace("pixel-1", 0)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m1" {
		t.Fatalf("got %#v, want m1 once pacing is off", s)
	}
}
