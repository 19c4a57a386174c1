package agent

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// helloHub answers each hello with what answer writes; it records the hellos.
type helloHub struct {
	mu     sync.Mutex
	hellos []string
	answer func(ctx context.Context, ws *websocket.Conn)
}

func (h *helloHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	_, data, err := ws.Read(r.Context())
	if err != nil {
		return
	}
	h.mu.Lock()
	h.hellos = append(h.hellos, string(data))
	h.mu.Unlock()
	h.answer(r.Context(), ws)
}

func (h *helloHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.hellos)
}

// runAgentAt runs an agent against h and returns what Run returned.
func runAgentAt(t *testing.T, h http.Handler, tr Transport) <-chan error {
	t.Helper()
	_, _, ended := startAgent(t, h, tr)
	return ended
}

// A hello refused with an error frame and close 4510 stops the agent for
// good (PROTOCOL.md 7.1 rule 3, section 13): the error frame that comes
// first must not hide the close code.
func TestUnsupportedProtocolAfterErrorFrameStops(t *testing.T) {
	t.Parallel()
	h := &helloHub{answer: func(ctx context.Context, ws *websocket.Conn) {
		write(ctx, ws, proto.Error{Code: "unsupported_protocol", Message: "protocol 1 is not spoken here"})
		ws.Close(websocket.StatusCode(proto.CloseUnsupportedVer), "unsupported protocol")
	}}
	ended := runAgentAt(t, h, &memTransport{inbox: make(chan Received)})
	var err error
	select {
	case err = <-ended:
	case <-time.After(poll.Timeout):
		t.Fatalf("the agent did not stop; it sent %d hellos", h.count())
	}
	var fatal *FatalError
	if !errors.As(err, &fatal) || !strings.Contains(err.Error(), "4510") {
		t.Fatalf("got %v, want a FatalError naming close 4510", err)
	}
	if n := h.count(); n != 1 {
		t.Fatalf("hellos: got %d, want 1 (no reconnect after 4510)", n)
	}
}

// A send that arrives before welcome is journaled and acked, not taken
// for a broken link (PROTOCOL.md 7.2).
func TestSendBeforeWelcomeIsTaken(t *testing.T) {
	t.Parallel()
	job := proto.Send{ID: "early-1", Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	acked := make(chan struct{}, 8)
	h := &helloHub{answer: func(ctx context.Context, ws *websocket.Conn) {
		write(ctx, ws, job)
		write(ctx, ws, proto.Welcome{DeviceFingerprint: "fp", ServerTime: stamp(time.Now()), PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "BOTH"})
		answerJobs(ctx, ws, acked)
	}}
	tr := &memTransport{inbox: make(chan Received)}
	runAgentAt(t, h, tr)
	select {
	case <-acked:
	case <-time.After(poll.Timeout):
		t.Fatal("the job sent before welcome was never acked")
	}
	poll.Until(t, "the early job runs", func() bool { return tr.count("early-1") == 1 })
	if n := h.count(); n != 1 {
		t.Fatalf("hellos: got %d, want 1 (the link was not dropped)", n)
	}
}

// The agent checks its hello with the server's rules before sending it
// (PROTOCOL.md 7.1 rule 4): a number the server would refuse is left out,
// a long carrier name is cut, and at most 20 numbers of each channel go.
func TestHelloIsValidatedBeforeSending(t *testing.T) {
	t.Parallel()
	h := &helloHub{answer: func(ctx context.Context, ws *websocket.Conn) {
		write(ctx, ws, proto.Welcome{DeviceFingerprint: "fp", ServerTime: stamp(time.Now()), PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "BOTH"})
		// Read until the link ends, so the agent's close at the test's end
		// is answered at once rather than after its close timeout.
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}}
	var wa []proto.WhatsAppNumber
	for i := range 25 {
		wa = append(wa, proto.WhatsAppNumber{Phone: "+1555010" + string(rune('0'+i/10)) + string(rune('0'+i%10)) + "00"})
	}
	tr := &inventoryTransport{memTransport: memTransport{inbox: make(chan Received)}, inv: Inventory{
		SIMs: []proto.SIM{
			{Slot: proto.SIM1, Carrier: strings.Repeat("é", 40), PhoneNumber: "0555 123 4567"},
			{Slot: proto.SIM2, PhoneNumber: "+44 (7700) 900-002"},
			{Slot: proto.SIM2, Carrier: "twice"},
		},
		WhatsApp: wa,
	}}
	runAgentAt(t, h, tr)
	poll.Until(t, "a hello arrives", func() bool { return h.count() > 0 })
	h.mu.Lock()
	data := h.hellos[0]
	h.mu.Unlock()
	f, err := proto.Decode([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	hello := f.(*proto.Hello)
	if len(hello.SIMs) != 2 {
		t.Fatalf("sims: got %+v, want two, each slot once", hello.SIMs)
	}
	if hello.SIMs[0].PhoneNumber != "" {
		t.Errorf("SIM1 number: got %q, want it left out (not E.164)", hello.SIMs[0].PhoneNumber)
	}
	if len(hello.SIMs[0].Carrier) > 64 || !strings.HasPrefix(strings.Repeat("é", 40), hello.SIMs[0].Carrier) {
		t.Errorf("carrier: got %d bytes %q, want at most 64 bytes cut on a character", len(hello.SIMs[0].Carrier), hello.SIMs[0].Carrier)
	}
	if hello.SIMs[1].PhoneNumber != "+447700900002" {
		t.Errorf("SIM2 number: got %q, want +447700900002", hello.SIMs[1].PhoneNumber)
	}
	if len(hello.WhatsApp) != 20 {
		t.Errorf("whatsapp: got %d numbers, want at most 20", len(hello.WhatsApp))
	}
}

type inventoryTransport struct {
	memTransport
	inv Inventory
}

func (t *inventoryTransport) Inventory(context.Context) (Inventory, error) { return t.inv, nil }

// welcomeWithJob is a hub's side of a link after the hello: a welcome
// naming pingSecs as its ping interval, then job, then answerJobs.
func welcomeWithJob(ctx context.Context, ws *websocket.Conn, pingSecs int, job proto.Send, acked chan<- struct{}) {
	write(ctx, ws, proto.Welcome{DeviceFingerprint: "fp", ServerTime: stamp(time.Now()), PingIntervalSeconds: pingSecs, MaxInflight: 16, SelectedSIM: "BOTH"})
	write(ctx, ws, job)
	answerJobs(ctx, ws, acked)
}

// answerJobs is a hub's side of a link once welcomed: it tells acked of
// each ack and answers each status, until the link ends.
func answerJobs(ctx context.Context, ws *websocket.Conn, acked chan<- struct{}) {
	readFrames(ctx, ws, func(_ []byte, f proto.Frame) {
		switch f := f.(type) {
		case *proto.Ack:
			acked <- struct{}{}
		case *proto.Status:
			write(ctx, ws, proto.StatusAck{ID: f.ID, Status: f.Status})
		}
	})
}
