package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
)

// downHub links every device and its looks at the store fail, as while
// the database hangs (each look then waits out the store's deadline): it
// counts the looks and records what it is told to do.
type downHub struct {
	*gateway.Hub
	mu    sync.Mutex
	looks int
	told  map[string]bool
}

func (h *downHub) Online(string, uint64) bool                    { return true }
func (h *downHub) LinkDevice(string) (uint64, bool)              { return 7, true }
func (h *downHub) Refresh(string, uint64) bool                   { h.look(); return false }
func (h *downHub) Pace(fp string, _ uint64, _ int)               { h.tell("pace " + fp) }
func (h *downHub) Configure(fp string, _ uint64, _ proto.Config) { h.tell("configure " + fp) }

func (h *downHub) DisconnectChanged(fp string, id uint64, code int, reason string) bool {
	h.look()
	h.Disconnect(fp, id, code, reason) // closed as told
	return false
}

func (h *downHub) Disconnect(fp string, _ uint64, _ int, _ string) <-chan struct{} {
	h.tell("disconnect " + fp)
	done := make(chan struct{})
	close(done)
	return done
}

func (h *downHub) look() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.looks++
}

func (h *downHub) tell(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.told[s] = true
}

// Controls heard while the database does not answer are run as told after
// the first look at the store that fails, not each after a look of its
// own: every look waits out the store's deadline (30 s), and the kicks and
// link signals heard after the controls wait for them all. Before, a burst
// of disconnects and settings changes of many devices linked here held
// them up one deadline per device.
func TestHeardControlsLookOnceWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	log := slog.New(slog.DiscardHandler)
	hub := &downHub{Hub: gateway.New(gateway.Config{}, nil, nil, log, time.Now), told: map[string]bool{}}
	g, err := NewGateway(GatewayConfig{Bus: nodeBus(t, url, "b"), Hub: hub, Live: time.Second, SweepEvery: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	heard := func(c ctl) {
		t.Helper()
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		g.heardCtl(Message{Topic: topicCtl, Data: data})
	}
	const n = 5
	for i := range n {
		heard(ctl{Op: "disconnect", Fingerprint: fmt.Sprintf("gone-%d", i), Code: proto.CloseDeviceGone, Reason: "device disabled"})
		heard(ctl{Op: "disconnect", Fingerprint: fmt.Sprintf("gone-%d", i), Code: proto.CloseDeviceGone, Reason: "device disabled"})
	}
	for i := range n {
		heard(ctl{Op: "configure", Fingerprint: fmt.Sprintf("set-%d", i), Config: &proto.Config{SelectedSIM: "SIM1", DeviceName: "phone", Status: "active"}})
		heard(ctl{Op: "pace", Fingerprint: fmt.Sprintf("set-%d", i), PerMinute: 5})
	}
	g.runHeardOnce()

	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.looks != 1 {
		t.Errorf("the store was looked at %d times for the controls heard while it did not answer, want once", hub.looks)
	}
	for i := range n {
		for _, want := range []string{fmt.Sprintf("disconnect gone-%d", i), fmt.Sprintf("configure set-%d", i), fmt.Sprintf("pace set-%d", i)} {
			if !hub.told[want] {
				t.Errorf("%q was not run as told", want)
			}
		}
	}
}

// hungStore is a link store whose database hangs: every read fails (as it
// does once the store's deadline passes), counted.
type hungStore struct {
	LinkStore
	mu    sync.Mutex
	reads int
}

func (s *hungStore) read() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return errors.New("the database did not answer within its deadline")
}

func (s *hungStore) LinkEpochs([]uint64) (map[uint64]uint64, error) { return nil, s.read() }
func (s *hungStore) GoneDevices([]uint64) (map[uint64]bool, error)  { return nil, s.read() }
func (s *hungStore) EndLink(uint64, uint64) error                   { return s.read() }

func (s *hungStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// While the database hangs, one pass waits out one store deadline, not
// two: the link signals' read of the epochs fails, and the controls heard
// with them are run as told without a look of their own; the sweep's read
// of the epochs fails, and the devices gone are not read after it; and a
// sweep with a link's end to write again (one the database did not take)
// reads nothing more once that write fails. Before, each pass waited for
// two.
func TestOnePassWaitsOneDeadlineWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	log := slog.New(slog.DiscardHandler)
	hub := &downHub{Hub: gateway.New(gateway.Config{}, nil, nil, log, time.Now), told: map[string]bool{}}
	st := &hungStore{}
	// The node's beats fail too: neither steady nor current.
	never := func() bool { return false }
	g, err := NewGateway(GatewayConfig{Bus: nodeBus(t, url, "b"), Store: st, Hub: hub, Live: time.Second, SweepEvery: time.Hour, Steady: never, Current: never, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g.heardLink(Message{Topic: topicLink, Data: []byte("moved 3")})
	hearCtl(t, g, ctl{Op: "disconnect", Fingerprint: "gone", Device: 7, Code: proto.CloseDeviceGone, Reason: "device disabled"})
	hearCtl(t, g, ctl{Op: "pace", Fingerprint: "paced", Device: 7, PerMinute: 5})
	g.runHeardOnce()
	hub.mu.Lock()
	looks, told := hub.looks, maps.Clone(hub.told)
	hub.mu.Unlock()
	if reads := st.count(); reads != 1 || looks != 0 {
		t.Errorf("a pass of what was heard read the store %d times and looked %d times, want one read and no look", reads, looks)
	}
	for _, want := range []string{"disconnect gone", "pace paced"} {
		if !told[want] {
			t.Errorf("%q was not run as told", want)
		}
	}

	g.hub = &linksHub{Hub: hub, links: []gateway.Link{{Fingerprint: "linked", DeviceID: 7, Epoch: 1}}, gone: map[string]string{}}
	g.sweep()
	if reads := st.count() - 1; reads != 1 {
		t.Errorf("a sweep read the store %d times, want once", reads)
	}
	g.Ended(store.Device{ID: 9, Fingerprint: "ended"}, 2) // not taken: written again at each sweep
	before := st.count()
	g.sweep()
	if reads := st.count() - before; reads != 1 {
		t.Errorf("a sweep with a link's end to write again read the store %d times, want once", reads)
	}
}

// heldHub links every device; its look at the store for a disconnect heard
// waits until free is closed (a database that hangs, each look waiting out
// the store's deadline), and it records the devices kicked.
type heldHub struct {
	*gateway.Hub
	looking chan struct{} // closed as the first look begins
	free    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	kicked  map[devKey]bool
}

func (h *heldHub) Online(string, uint64) bool       { return true }
func (h *heldHub) LinkDevice(string) (uint64, bool) { return 7, true }

func (h *heldHub) KickLinked(fp string, id uint64, _ bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kicked[devKey{fp, id}] = true
	return true
}

func (h *heldHub) DisconnectChanged(string, uint64, int, string) bool {
	h.once.Do(func() { close(h.looking) })
	<-h.free
	return false
}

func (h *heldHub) wasKicked(d devKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kicked[d]
}

// A kick heard from another node reaches the link here at once, whatever
// the node is doing with the controls it heard before: a disconnect's look
// at a database that hangs waits out the store's deadline (30 s), and a
// kick never reads the store. Before, kicks heard waited in a queue for
// the goroutine that runs the controls, and every send to a phone linked
// here through another node waited that deadline.
func TestHeardKicksDoNotWaitForControls(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	log := slog.New(slog.DiscardHandler)
	hub := &heldHub{Hub: gateway.New(gateway.Config{}, nil, nil, log, time.Now), looking: make(chan struct{}), free: make(chan struct{}), kicked: map[devKey]bool{}}
	freed := sync.OnceFunc(func() { close(hub.free) })
	g, err := NewGateway(GatewayConfig{Bus: nodeBus(t, url, "b"), Hub: hub, Live: time.Second, SweepEvery: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	t.Cleanup(func() { freed(); cancel(); <-done })
	a := nodeBus(t, url, "a")
	if err := g.bus.Ready(ctx); err != nil { // b's subscriptions are on the server
		t.Fatal(err)
	}

	data, err := json.Marshal(ctl{Op: "disconnect", Fingerprint: "disabled", Device: 7, Code: proto.CloseDeviceGone, Reason: "device disabled"})
	if err != nil {
		t.Fatal(err)
	}
	a.Publish(topicCtl, data)
	select {
	case <-hub.looking:
	case <-time.After(poll.Timeout):
		t.Fatal("the disconnect heard was not looked at")
	}
	kicked := devKey{"sent-to", 9}
	a.Publish(topicKick, wireKicks([]kick{{devKey: kicked}}))
	poll.Within(t, 5*time.Second, "the kick heard reaches the link while a control's look at the store waits", func() bool {
		return hub.wasKicked(kicked)
	})
}
