package gateway

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
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
	ws, _, err := r.dial(r.pair("pixel-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test"})
	select {
	case <-held.called:
	case <-time.After(poll.Timeout):
		t.Fatal("the hello did not reach the store")
	}
	go func() { _, _, _ = ws.Read(context.Background()) }() // answers the server's close
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- r.hub.Shutdown(ctx)
	}()
	// Draining is set before the close: seen under the hub's lock, it
	// orders nothing of the close after it.
	eventually(t, "the hub draining", r.hub.isDraining)
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
