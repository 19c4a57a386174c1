package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
)

// closeHandshakeBound is the longest the server's close of a link that
// does not read can take before the connection is gone: 1 s for the error
// frame (closeWithFrame), then the WebSocket library's 5 s to write the
// close frame behind a write stuck on the phone and 5 s for the phone's
// close frame.
const closeHandshakeBound = 11 * time.Second

// queueJobs queues n SMS for the device from a few goroutines at once (the
// store commits them in groups) and returns their ids.
func (r *rig) queueJobs(device string, n int) map[string]bool {
	r.t.Helper()
	var mu sync.Mutex
	ids := make(map[string]bool, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: device, Phone: "+15551234567", Message: fmt.Sprint("job ", i)}, nil)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ids[m.UUID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		r.t.Fatal(err)
	}
	return ids
}

// A phone coming back to a backlog acks every job and reports it sent and
// delivered at once, as fast as it can: every frame answers a send of the
// server, so it is never closed as a flood, whatever the backlog.
func TestDrainingABacklogIsNotFlood(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{}) // the default flood limit: 50 frames/s, burst 200
	token := r.pair("pixel-1")
	// 1,000 jobs are 1,000 acks and 2,000 statuses, each kind alone 5 and
	// 10 times the burst: were either charged, the limit would trip long
	// before the drain ends, which takes hundreds of jobs a second even
	// under -race on a loaded machine against the limit's 50 frames.
	const jobs = 1000
	want := r.queueJobs("pixel-1", jobs)
	ws := r.connect(token)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, statusAcks := 0, 0
	for got < jobs || statusAcks < 2*jobs {
		_, data, err := ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				t.Fatalf("closed with %d %q after %d of %d jobs", ce.Code, ce.Reason, got, jobs)
			}
			t.Fatalf("after %d of %d jobs: %v", got, jobs, err)
		}
		f, err := proto.Decode(data)
		if err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		switch f := f.(type) {
		case *proto.Send:
			if !want[f.ID] {
				t.Fatalf("got job %s twice or unknown", f.ID)
			}
			delete(want, f.ID)
			got++
			writeFrame(t, ws, proto.Ack{ID: f.ID})
			writeFrame(t, ws, proto.Status{ID: f.ID, Status: proto.StatusSent})
			writeFrame(t, ws, proto.Status{ID: f.ID, Status: proto.StatusDelivered})
		case *proto.StatusAck:
			statusAcks++
		default:
			t.Fatalf("got %s, want only sends and status acks", data)
		}
	}
	if n := r.hub.Count(); n != 1 {
		t.Fatalf("got %d links after the drain, want the phone's one", n)
	}
}

// What a phone sends unasked is still limited: a flood of any of these is
// closed with 4029 (the phone reads its answers, so no queue overflows).
func TestUnaskedFloodIsClosed(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{FrameRate: 5, FrameBurst: 20})
	r.pair("other")
	theirs := r.queueJobs("other", 1)
	var otherID string
	for id := range theirs {
		otherID = id
	}
	cases := []struct {
		name  string
		frame func(i int) proto.Frame
		raw   func(i int) string
		setup func(t *testing.T, ws *websocket.Conn) string // returns a job id of the phone
	}{
		{name: "inbound", frame: func(i int) proto.Frame {
			return proto.Inbound{ClientID: fmt.Sprint("c", i), Channel: "sms", From: "+15550100000", Message: "x"}
		}},
		{name: "unknown frame type", raw: func(int) string { return `{"type":"teleport"}` }},
		{name: "ack of an unknown id", frame: func(i int) proto.Frame { return proto.Ack{ID: fmt.Sprint("nope-", i)} }},
		{name: "status of an unknown id", frame: func(i int) proto.Frame { return proto.Status{ID: fmt.Sprint("nope-", i), Status: "sent"} }},
		{name: "ack of another device's job", frame: func(int) proto.Frame { return proto.Ack{ID: otherID} }},
		{name: "status of another device's job", frame: func(int) proto.Frame { return proto.Status{ID: otherID, Status: "delivered"} }},
		{name: "repeated status of its own job", setup: func(t *testing.T, ws *websocket.Conn) string {
			s, ok := readFrame(t, ws).(*proto.Send)
			if !ok {
				t.Fatalf("got %#v, want the job", s)
			}
			writeFrame(t, ws, proto.Ack{ID: s.ID})
			return s.ID
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fp := fmt.Sprint("pixel-", i)
			token := r.pair(fp)
			ws := r.connect(token)
			defer ws.CloseNow()
			if c.setup != nil {
				r.queueJobs(fp, 1)
				id := c.setup(t, ws)
				c.frame = func(int) proto.Frame { return proto.Status{ID: id, Status: "sent"} }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			go func() {
				for i := range 200 {
					data := []byte(nil)
					if c.raw != nil {
						data = []byte(c.raw(i))
					} else {
						data, _ = proto.Encode(c.frame(i))
					}
					if ws.Write(ctx, websocket.MessageText, data) != nil {
						return
					}
				}
			}()
			if got := closeAfterBacklog(t, ws); got != proto.CloseFlood {
				t.Fatalf("got close %d, want 4029", got)
			}
		})
	}
}

// Error frames repeat at most proto.MaxEchoBytes of any value from the
// phone's frame, cut on a UTF-8 boundary: a 65 KB type or id does not come
// back as a frame over the protocol's own limit.
func TestErrorFramesCapWhatTheyEcho(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	huge := strings.Repeat("é", 32000) // 64,000 bytes, two per character
	cases := []struct {
		name  string
		frame string
		echo  func(*proto.Error) string
	}{
		{"unknown type", fmt.Sprintf(`{"type":%q}`, huge), func(e *proto.Error) string { return e.Message }},
		{"ack id", fmt.Sprintf(`{"type":"ack","id":%q}`, huge), func(e *proto.Error) string { return e.ID }},
		{"status id", fmt.Sprintf(`{"type":"status","id":%q,"status":"sent"}`, huge), func(e *proto.Error) string { return e.ID }},
		{"inbound client_id", fmt.Sprintf(`{"type":"inbound","client_id":%q,"channel":"sms","from":"+15550100000","message":"x"}`, huge), func(e *proto.Error) string { return e.ClientID }},
		{"control characters", jsonObject(map[string]string{"type": strings.Repeat("\x01", 10000)}), func(e *proto.Error) string { return e.Message }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			writeRaw(t, ws, []byte(c.frame))
			data := readSmall(t, ws)
			f, err := proto.Decode(data)
			e, ok := f.(*proto.Error)
			if err != nil || !ok {
				t.Fatalf("got %s, want an error frame", data)
			}
			got := c.echo(e)
			if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) {
				t.Fatalf("the echo %q was not cut on a UTF-8 boundary", got)
			}
			if c.name == "ack id" || c.name == "status id" || c.name == "inbound client_id" {
				if want := huge[:proto.MaxEchoBytes]; got != want {
					t.Fatalf("got an echo of %d bytes, want the first %d bytes", len(got), proto.MaxEchoBytes)
				}
			}
		})
	}
	// A cut that falls inside a character moves back to its start.
	odd := "a" + strings.Repeat("€", 100) // 1 + 3*100 bytes; byte 128 is inside a euro sign
	if got := echo(odd); len(got) != 127 || !utf8.ValidString(got) {
		t.Fatalf("echo: got %d bytes (valid %v), want 127", len(got), utf8.ValidString(got))
	}
}

func jsonObject(v map[string]string) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// queuedBytes is the size of the frames waiting for the device's link;
// open is false once the link is closing or gone.
func queuedBytes(h *Hub, fingerprint string) (n int, open bool) {
	c := h.lookup(fingerprint)
	if c == nil {
		return 0, false
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.queued, !c.closed()
}

// A phone that never reads is closed (4008) once the frames waiting for it
// reach the byte bound, long before the frame count would stop them. The
// socket's buffers are small (tinySendBuffer): what the phone reads before
// its close is then the queue and a few KB, not megabytes.
func TestQueueIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	const bound = 16 << 10
	r := newRigServed(t, Config{QueueLen: 100000, QueueBytes: bound, SendBuffer: tinySendBuffer}, time.Now, storetest.Options{}, nil)
	ws, _, err := r.dial(r.pair("stuck"), tinyReceiveBuffer())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1})
	eventually(t, "online", func() bool { return r.hub.Online("stuck", r.id("stuck")) })

	cfg := r.rename("stuck", strings.Repeat("n", 100))
	peak, pushes := 0, 0
	for ; pushes < 200000; pushes++ {
		q, open := queuedBytes(r.hub, "stuck")
		if !open {
			break
		}
		if q > bound {
			t.Fatalf("%d bytes queued, over the bound of %d", q, bound)
		}
		peak = max(peak, q)
		r.hub.Configure("stuck", r.id("stuck"), cfg)
	}
	frame, _ := proto.Encode(cfg)
	if peak < bound-len(frame) {
		t.Fatalf("closed with %d bytes queued after %d pushes, want it closed at the bound of %d", peak, pushes, bound)
	}
	if got := closeAfterBacklog(t, ws); got != proto.CloseTooSlow {
		t.Fatalf("got close %d, want 4008", got)
	}
}

// A burst of bad frames from a phone that never reads is a flood (4029):
// their error answers are charged before they can fill the queue (4008),
// and error answers that do overflow it are flood too.
func TestBurstOfBadFramesIsFlood(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 60000)
	// The burst trips the limit only while the server reads faster than
	// the limit refills: under -race on a loaded machine a 60 KB frame took
	// 100 ms and more to read, decode and commit, near 5 a second's 200 ms,
	// and the flood came seconds late; at 1 a second it comes after a few
	// frames past the burst, however slow the server is.
	tight := Config{QueueLen: 8, FrameRate: 1, FrameBurst: 20}
	for _, c := range []struct {
		name  string
		cfg   Config
		frame string
		n     int
	}{
		{"unknown types", tight, fmt.Sprintf(`{"type":%q}`, big), 300},
		{"refused reports", tight, fmt.Sprintf(`{"type":"ack","id":%q}`, big), 300},
		{"short unknown types at the default limit", Config{}, `{"type":"teleport"}`, 2000},
		{"answers overflowing the queue", Config{QueueLen: 4, FrameRate: 1e6, FrameBurst: 1e6},
			jsonObject(map[string]string{"type": strings.Repeat("\x01", 200)}), 100000},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case its own rig: the handshakes they wait out overlap
			r := newRig(t, c.cfg)
			ws, _, err := r.dial(r.pair("mute"), tinyReceiveBuffer())
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			writeFrame(t, ws, proto.Hello{Protocol: 1})
			id := r.id("mute")
			eventually(t, "online", func() bool { return r.hub.Online("mute", id) })
			// The burst, written without reading; the writer may block once
			// the server stops reading, so it runs on its own and ends when
			// the connection does. It may outlive the test (its store
			// closed): it reads nothing but the hub, with the id read here.
			go func() {
				for i := 0; i < c.n && r.hub.Online("mute", id); i++ {
					if ws.Write(context.Background(), websocket.MessageText, []byte(c.frame)) != nil {
						return
					}
				}
			}()
			// The server's decision is the flood close, logged as it is taken.
			r.serverClosed("mute", proto.CloseFlood)
			// The phone is offline from that decision on, though its close
			// handshake may wait seconds on it: the hub no longer counts it
			// as linked, and the failover sweep counts its time offline.
			if r.hub.Online("mute", r.id("mute")) || !r.hub.LastSeen("mute", r.id("mute")).IsZero() || len(r.hub.Presence(r.ids("mute"))) != 0 {
				t.Fatal("the phone is still reported online after the server decided to close its link")
			}
			mute, err := r.devices.Get(context.Background(), r.company, "mute")
			if err != nil {
				t.Fatal(err)
			}
			if r.hub.OfflineSince("mute", mute.ID).IsZero() {
				t.Fatal("OfflineSince is zero for a link the server is closing")
			}
			// Then the link ends. When the answerer, not the reader, took the
			// decision (refused reports are charged once their commit says
			// they moved nothing), the reader ends only with the close
			// handshake, which waits for a phone that does not read: up to
			// closeHandshakeBound. The deadline is that on top of the usual one.
			poll.Within(t, poll.Timeout+closeHandshakeBound, "the server ends the link", func() bool { return r.hub.Count() == 0 })
			// The phone, reading only now, sees the close unless its own
			// blocked write holds up its answer to the close past the
			// handshake's 5 s (PROTOCOL.md, section 9), so its view is
			// checked only when the frame came.
			if got, ok := closeOrEnd(t, ws); ok && got != proto.CloseFlood {
				t.Fatalf("got close %d, want 4029", got)
			}
		})
	}
}

// A hello whose protocol number does not fit is refused without repeating
// its digits: the answer stays small whatever the frame held.
func TestHelloWithHugeNumberIsNotEchoed(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	for name, value := range map[string]string{
		"out of range": "1" + strings.Repeat("9", 60000),
		"a fraction":   "1." + strings.Repeat("9", 60000),
		"a string":     `"` + strings.Repeat("9", 60000) + `"`,
	} {
		t.Run(name, func(t *testing.T) {
			ws, _, err := r.dial(r.pair("pixel-"+strings.ReplaceAll(name, " ", "-")), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			writeRaw(t, ws, []byte(`{"type":"hello","protocol":`+value+`}`))
			data := readSmall(t, ws)
			if e, ok := mustDecode(t, data).(*proto.Error); !ok || e.Code != "protocol_error" || !strings.Contains(e.Message, "protocol") {
				t.Fatalf("got %s, want a protocol_error naming protocol", data)
			}
			if code := closeCode(t, ws); code != proto.CloseProtocolError {
				t.Fatalf("got close %d, want %d", code, proto.CloseProtocolError)
			}
		})
	}
}

// An integer field written with a fraction or an exponent (10.0, 1e1: what
// a phone that keeps its battery level in a float writes) is refused as the
// frame's fault, saying what the field must be: it was "battery is out of
// range", which a battery of 10 is not, and the phone's developer was left
// to guess.
func TestWholeNumberWrittenWithFractionIsNamed(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	for name, value := range map[string]string{"a fraction": "10.0", "an exponent": "1e1"} {
		t.Run(name, func(t *testing.T) {
			ws := r.connect(r.pair("pixel-whole-" + strings.ReplaceAll(name, " ", "-")))
			writeRaw(t, ws, []byte(`{"type":"health","battery":`+value+`}`))
			data := readSmall(t, ws)
			e, ok := mustDecode(t, data).(*proto.Error)
			if !ok || e.Code != "protocol_error" || !strings.Contains(e.Message, "battery must be a whole number") {
				t.Fatalf("got %s, want a protocol_error saying battery must be a whole number", data)
			}
			if code := closeCode(t, ws); code != proto.CloseProtocolError {
				t.Fatalf("got close %d, want %d", code, proto.CloseProtocolError)
			}
		})
	}
}

// closeOrEnd reads until the link ends and returns the close code, ok false
// when it ended without a close frame.
func closeOrEnd(t *testing.T, ws *websocket.Conn) (websocket.StatusCode, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, true
			}
			return 0, false
		}
	}
}

// readSmall reads the server's next frame, which must be under 1 KiB: an
// answer whose echoes are capped, whatever the frame it answers held.
func readSmall(t *testing.T, ws *websocket.Conn) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 1024 {
		t.Fatalf("got an answer of %d bytes, want under 1 KiB", len(data))
	}
	return data
}

func mustDecode(t *testing.T, data []byte) proto.Frame {
	t.Helper()
	f, err := proto.Decode(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return f
}

// The hello that opens a link is a frame the phone sends unasked, and
// counts toward the flood limit as the contract lists it: with a burst of
// two, the hello and one unknown frame fit, and a second unknown frame is
// flood. The hello was left out, so that a third was.
func TestHelloCountsTowardTheFloodLimit(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{FrameRate: 0.001, FrameBurst: 2})
	ws := r.connect(r.pair("pixel-1"))
	writeRaw(t, ws, []byte(`{"type":"teleport"}`))
	if e, ok := readFrame(t, ws).(*proto.Error); !ok || e.Code != "unknown_frame" {
		t.Fatalf("got %#v, want the unknown frame's error", e)
	}
	writeRaw(t, ws, []byte(`{"type":"teleport"}`))
	if e, ok := readFrame(t, ws).(*proto.Error); !ok || e.Code != "flood" {
		t.Fatalf("got %#v, want the flood's error", e)
	}
	if got := closeCode(t, ws); got != proto.CloseFlood {
		t.Fatalf("got close %d, want 4029", got)
	}
}
