package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
)

// stuckHub links every device; the channel of its Disconnect, closed once
// the device's last seen is written, stays open, as while that write hangs
// on a database under strain. It records what it is told.
type stuckHub struct {
	*gateway.Hub
	stuck chan struct{}
	mu    sync.Mutex
	told  map[string]bool
}

func (h *stuckHub) Online(string, uint64) bool       { return true }
func (h *stuckHub) LinkDevice(string) (uint64, bool) { return 7, true }

func (h *stuckHub) KickLinked(fp string, _ uint64, _ bool) bool {
	h.tell("kick " + fp)
	return true
}

func (h *stuckHub) Disconnect(fp string, _ uint64, _ int, _ string) <-chan struct{} {
	h.tell("disconnect " + fp)
	return h.stuck
}

// DisconnectChanged, which a disconnect heard from another node runs,
// returns no channel to wait on.
func (h *stuckHub) DisconnectChanged(fp string, _ uint64, _ int, _ string) bool {
	h.tell("disconnect " + fp)
	return true
}

func (h *stuckHub) tell(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.told[s] = true
}

func (h *stuckHub) heard(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.told[s]
}

// A disconnect heard from another node (whose request answers there) does
// not wait for the device's last seen to be written: the controls and kicks
// heard after it ran only once that write was done.
func TestHeardDisconnectDoesNotWaitForTheStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	url := natstest.Start(t)
	a := nodeBus(t, url, "a")
	b := nodeBus(t, url, "b")
	log := slog.New(slog.DiscardHandler)
	hub := &stuckHub{Hub: gateway.New(gateway.Config{}, nil, nil, log, time.Now), stuck: make(chan struct{}), told: map[string]bool{}}
	g, err := NewGateway(GatewayConfig{Bus: b, Hub: hub, Live: time.Second, SweepEvery: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(ctx); err != nil { // b's subscriptions are on the server
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	t.Cleanup(func() { close(hub.stuck); cancel(); <-done })

	data, err := json.Marshal(ctl{Op: "disconnect", Fingerprint: "phone-1", Code: 4503, Reason: "device disabled"})
	if err != nil {
		t.Fatal(err)
	}
	a.Publish(topicCtl, data)
	poll.Within(t, 10*time.Second, "phone-1's link closed on b", func() bool { return hub.heard("disconnect phone-1") })
	a.Publish(topicKick, []byte("phone-2"))
	poll.Within(t, 10*time.Second, "phone-2's kick run on b", func() bool { return hub.heard("kick phone-2") })
}
