package gateway

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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

// heldLog is a log handler that holds the first record of message msg
// (whatever its level) until release is closed, closing reached as it gets
// there; every other record, and that one once released, goes to the
// handler under it as that handler's level allows.
type heldLog struct {
	slog.Handler
	msg     string
	reached chan struct{}
	release chan struct{}
	once    *sync.Once
}

func newHeldLog(under slog.Handler, msg string) *heldLog {
	return &heldLog{Handler: under, msg: msg, reached: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}}
}

func (h *heldLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *heldLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		held := false
		h.once.Do(func() { held = true })
		if held {
			close(h.reached)
			<-h.release
		}
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *heldLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &heldLog{Handler: h.Handler.WithAttrs(as), msg: h.msg, reached: h.reached, release: h.release, once: h.once}
}

func (h *heldLog) WithGroup(name string) slog.Handler {
	return &heldLog{Handler: h.Handler.WithGroup(name), msg: h.msg, reached: h.reached, release: h.release, once: h.once}
}

// A close can come while the link is in its hello (a shutdown, the hello's
// timeout), on another goroutine than the one that stores the hello and
// keeps the device it answers: the close reads the link's fingerprint,
// which must not be the field the hello writes. Shutdown here closes the
// link while its hello waits on the store, and is held in its close's log
// line (so that no lock it takes after it orders the two); the hello then
// goes on. Under -race, a close that reads the device written by the hello
// is reported.
func TestACloseDuringTheHelloReadsNothingTheHelloWrites(t *testing.T) {
	t.Parallel()
	held := &helloHeld{called: make(chan struct{}), gate: make(chan struct{})}
	var logHeld *heldLog
	opened, released := false, false
	t.Cleanup(func() {
		if !opened {
			close(held.gate)
		}
		if !released {
			close(logHeld.release)
		}
	})
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{
		devices: func(d *device.Service) Devices { held.Devices = d; return held },
		wire: func(h *Hub, log *slog.Logger) {
			logHeld = newHeldLog(log.Handler(), "phone link closed by the server")
			h.log = slog.New(logHeld)
		}})
	// Draining is set before the close: seen under the hub's lock, it
	// orders nothing of the close after it.
	stopped := shutdownDuringHello(t, r, held)
	opened = true
	close(held.gate) // the hello goes on, and keeps the device it stored
	select {
	case <-logHeld.reached:
	case <-time.After(poll.Timeout):
		t.Fatal("the shutdown did not close the link")
	}
	released = true
	close(logHeld.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// A close decided while the link's reader still ran (a disconnect), whose
// goroutines start once the reader has ended on its own and Shutdown has
// waited for every goroutine of the hub, must not start them: a goroutine
// counted from zero as Shutdown's Wait returns races it (WaitGroup), and
// one started after it outlives the hub that said it had none left. Here
// the close is held in its log line until the link's reader ended (the
// phone's next frame, read once the link is closing) and Shutdown
// returned; the close then goes on. Before, it started its close
// handshake then, on a goroutine of the stopped hub: the phone got the
// close frame after Shutdown returned.
func TestNoLinkGoroutineStartsAfterShutdown(t *testing.T) {
	t.Parallel()
	var logHeld *heldLog
	released := false
	t.Cleanup(func() {
		if !released {
			close(logHeld.release)
		}
	})
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{
		wire: func(h *Hub, log *slog.Logger) {
			logHeld = newHeldLog(log.Handler(), "phone link closed by the server")
			h.log = slog.New(logHeld)
		}})
	ws := r.connect(r.pair("pixel-1"))
	id := r.id("pixel-1")
	closed := make(chan (<-chan struct{}), 1)
	go func() { closed <- r.hub.Disconnect("pixel-1", id, proto.CloseDeviceGone, "device deleted") }()
	select {
	case <-logHeld.reached:
	case <-time.After(poll.Timeout):
		t.Fatal("the disconnect did not close the link")
	}
	// The link is closing: the reader ends at the phone's next frame,
	// leaving the socket open for the close's handshake.
	writeRaw(t, ws, []byte(`{"type":"ping_me"}`))
	eventually(t, "the link unregistered", func() bool { return r.hub.Count() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	released = true
	close(logHeld.release)
	var stored <-chan struct{}
	select {
	case stored = <-closed:
	case <-time.After(poll.Timeout):
		t.Fatal("the disconnect did not return")
	}
	select {
	case <-stored:
	case <-time.After(poll.Timeout):
		t.Fatal("the disconnect's wait for the last seen never ended")
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	_, data, err := ws.Read(rctx)
	var ce websocket.CloseError
	switch {
	case err == nil:
		t.Fatalf("the phone got %s after Shutdown returned", data)
	case errors.As(err, &ce):
		t.Fatalf("the phone got a close frame (%d) after Shutdown returned: a goroutine of the link started after the hub had waited for all of them", ce.Code)
	case rctx.Err() != nil:
		t.Fatal("the socket was left open: nothing closed it once the close's handshake could not run")
	}
}

// inboundHeld holds the store's write of an inbound message until gate
// opens, closing called as it gets there.
type inboundHeld struct {
	Intake
	called, gate chan struct{}
}

func (i *inboundHeld) Inbound(ctx context.Context, dev store.Device, in proto.Inbound) (proto.InboundAck, error) {
	close(i.called)
	<-i.gate
	return i.Intake.Inbound(ctx, dev, in)
}

// Shutdown returns by its context's deadline, naming the goroutines of
// links still running, however long the store holds one of them: before,
// it cut the links at the deadline and then waited for every goroutine,
// one of which waited on the store (up to its own deadline, 30 s on
// PostgreSQL, or for ever on a store that hangs). The inbound the store
// held is not answered: its phone sends it again on its next link.
func TestShutdownReturnsByItsDeadline(t *testing.T) {
	t.Parallel()
	held := &inboundHeld{called: make(chan struct{}), gate: make(chan struct{})}
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(held.gate)
		}
	}
	t.Cleanup(open)
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{
		intake: func(in Intake) Intake { held.Intake = in; return held }})
	ws := r.connect(r.pair("pixel-1"))
	writeFrame(t, ws, proto.Inbound{ClientID: "in-1", Channel: "sms", From: "+15550100000", Message: "hi", ReceivedAt: "2026-11-22T10:00:00.000Z"})
	select {
	case <-held.called:
	case <-time.After(poll.Timeout):
		t.Fatal("the inbound did not reach the store")
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		stopped <- r.hub.Shutdown(ctx)
	}()
	var err error
	select {
	case err = <-stopped:
	case <-time.After(poll.Timeout):
		open()
		t.Fatal("Shutdown did not return while the store held a link's write")
	}
	var se *ShutdownError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &se) || !strings.Contains(se.Running, "1 reader") {
		t.Fatalf("Shutdown answered %v; want the deadline, and the reader the store holds named", err)
	}
	open()
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	for {
		_, data, err := ws.Read(rctx)
		if err != nil {
			break
		}
		if f, _ := proto.Decode(data); f != nil && f.FrameType() == proto.TypeInboundAck {
			t.Fatalf("the phone got %s for an inbound the store had not taken when the link was cut", data)
		}
	}
	eventually(t, "the held goroutine ended", func() bool { return r.hub.running() == "" })
}
