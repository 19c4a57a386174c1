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
	"github.com/simrelay/simrelay/store"
)

// helloHeld holds the store's hello of a link until gate opens, closing
// called as it gets there.
type helloHeld struct {
	Devices
	called, gate chan struct{}
}

func (h *helloHeld) Hello(ctx context.Context, dev store.Device, checked device.CheckedHello) (store.Device, error) {
	close(h.called)
	<-h.gate
	return h.Devices.Hello(ctx, dev, checked)
}

// presenceLog counts what the hub tells the presence hook.
type presenceLog struct {
	mu         sync.Mutex
	ups, downs int
}

func (p *presenceLog) Up(store.Device)   { p.mu.Lock(); p.ups++; p.mu.Unlock() }
func (p *presenceLog) Down(store.Device) { p.mu.Lock(); p.downs++; p.mu.Unlock() }

// A link whose hello was stored (which reports the device online) and that
// could then not be registered, the server shutting down meanwhile, is
// reported down, as one refused at its second look is: the device was left
// reported online with no link, no offline report to come.
func TestLinkNotRegisteredAfterItsHelloIsReportedDown(t *testing.T) {
	t.Parallel()
	held := &helloHeld{called: make(chan struct{}), gate: make(chan struct{})}
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(held.gate)
		}
	})
	pl := &presenceLog{}
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{
		devices: func(d *device.Service) Devices { held.Devices = d; return held },
		wire:    func(h *Hub, _ *slog.Logger) { h.SetPresence(pl) }})
	stopped := shutdownDuringHello(t, r, held)
	opened = true
	close(held.gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.ups != 0 || pl.downs != 1 {
		t.Fatalf("presence told up %d, down %d times; want down once (the hello reported it online)", pl.ups, pl.downs)
	}
}

// shutdownDuringHello links pixel-1, waits for its hello to reach held's
// store call, and starts the hub's Shutdown (the phone answers the
// server's close); once the hub is draining it returns the channel that
// gets Shutdown's answer. The hello is still held: the caller lets it go
// on (held.gate).
func shutdownDuringHello(t *testing.T, r *rig, held *helloHeld) <-chan error {
	t.Helper()
	ws, _, err := r.dial(r.pair("pixel-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
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
	eventually(t, "the hub draining", r.hub.isDraining)
	return stopped
}
