package cluster_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
)

type liveGot struct {
	company uint64
	body    string
}

func startLive(t *testing.T, bus *cluster.Bus) (*cluster.Live, chan liveGot) {
	t.Helper()
	got := make(chan liveGot, 16)
	l, err := cluster.StartLive(bus, func(company uint64, body []byte) error {
		got <- liveGot{company, string(body)}
		return nil
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := bus.Ready(context.Background()); err != nil { // the subscription is on the server
		t.Fatal(err)
	}
	return l, got
}

func TestLiveCarriesEventsByCompanyToOtherNodes(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	a, b := connect(t, url, "a"), connect(t, url, "b")
	la, gotA := startLive(t, a)
	_, gotB := startLive(t, b)

	// Garbage on a live topic reaches no one's deliver.
	a.Publish("live.not-a-company", []byte(`{}`))
	la.Offer(7, []byte(`{"id":1}`))
	la.Offer(8, []byte(`{"id":2}`))
	want := []liveGot{{7, `{"id":1}`}, {8, `{"id":2}`}}
	for i, w := range want {
		select {
		case g := <-gotB:
			if g != w {
				t.Fatalf("event %d on b: got %+v, want %+v", i, g, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d never reached b", i)
		}
	}
	// a does not hear itself: its own tabs had the event from its committer.
	if err := a.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-gotA:
		t.Fatalf("the publishing node heard its own event %+v", g)
	default:
	}
	if n := la.Dropped(); n != 0 {
		t.Errorf("dropped %d events with room in the bus's queue", n)
	}
}

func TestLiveDropsAndCountsWhatItCannotSend(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	l, _ := startLive(t, connect(t, url, "a"))
	l.Close()
	l.Close() // twice is harmless
	for range 3 {
		l.Offer(1, []byte(`{}`)) // never blocks after Close
	}
	if n := l.Dropped(); n != 3 {
		t.Fatalf("dropped: got %d, want 3", n)
	}
}

// TestLiveReportsAGapAfterTheBusReconnects: the NATS server goes away and
// comes back on its address; the node's bus reconnects by itself, and Live
// calls onGap (the broker's Resync), since what other nodes published
// meanwhile is gone.
func TestLiveReportsAGapAfterTheBusReconnects(t *testing.T) {
	t.Parallel()
	first := natstest.New(t)
	port := first.Addr().(*net.TCPAddr).Port
	bus := connect(t, first.ClientURL(), "a")
	gaps := make(chan struct{}, 4)
	l, err := cluster.StartLive(bus, func(uint64, []byte) error { return nil }, func() { gaps <- struct{}{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	first.Shutdown()
	// The address is free again once the first server is down, but under
	// load its start may take a while or find the port still held for a
	// moment: each try gets a few seconds, the whole a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		again, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go again.Start()
		t.Cleanup(again.Shutdown)
		if again.ReadyForConnections(3 * time.Second) {
			break
		}
		again.Shutdown()
		if time.Now().After(deadline) {
			ln, err := net.Listen("tcp", first.Addr().String())
			if err == nil {
				ln.Close()
			}
			t.Fatalf("the NATS server did not come back on %s (a listen there: %v)", first.Addr(), err)
		}
	}
	select {
	case <-gaps:
	case <-time.After(15 * time.Second):
		t.Fatal("no gap reported after the bus reconnected")
	}
}

// Events the bus drops are counted as Live's: while the client's
// reconnection handshake with a silent server holds its lock, the bus's
// queue fills with the node's other signals (one in the sender's hands,
// QueueSize waiting), and every event offered then is dropped there and
// counted in Dropped (simrelay_live_events_dropped_total). Before, Live's
// own queue fed the bus's and counted its own drops only: these were not
// counted at all.
func TestLiveCountsTheEventsTheBusDrops(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	bus := connect(t, relay.url(), "a")
	// Shut before the bus closes (cleanups run last first), ending the
	// handshake under way.
	t.Cleanup(relay.shut)
	l, _ := startLive(t, bus)
	relay.muted.Store(true)
	relay.cut()
	poll.Until(t, "the bus reconnecting to the silent server", func() bool { return relay.held.Load() > 0 })
	// The handshake holds the client's lock for the connect timeout (10 s)
	// from before its dial: what follows all comes within it. The sender
	// takes a first signal and waits on the lock with it.
	bus.Publish("kick", []byte("x"))
	poll.Until(t, "the sender waiting with a signal", func() bool { return bus.Waiting() == 0 })
	for range cluster.QueueSize {
		bus.Publish("kick", []byte("x"))
	}
	const offered = 100
	for i := range offered {
		l.Offer(7, []byte(strconv.Itoa(i)))
	}
	if got := l.Dropped(); got != offered {
		t.Fatalf("dropped %d of %d events offered with the bus's queue full, want all", got, offered)
	}
}

// A device's event (a link came or went) travels on its own topic: the
// other nodes hand it to their devices' deliver, never to the messages'
// one, which a node that knows no device events (subscribed to "live.*"
// alone) keeps to.
func TestLiveCarriesDeviceEventsApartFromMessages(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	a, b := connect(t, url, "a"), connect(t, url, "b")
	la, _ := startLive(t, a)
	lb, gotB := startLive(t, b)
	devices := make(chan liveGot, 16)
	if err := lb.HearDevices(func(company uint64, body []byte) error {
		devices <- liveGot{company, string(body)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Publish("live.x.device", []byte(`{}`)) // no company: nobody's
	la.OfferDevice(7, []byte(`{"device":"fp-1","online":true}`))
	la.Offer(7, []byte(`{"id":1}`))
	select {
	case g := <-devices:
		if want := (liveGot{7, `{"device":"fp-1","online":true}`}); g != want {
			t.Fatalf("device event on b: got %+v, want %+v", g, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the device event never reached b")
	}
	select {
	case g := <-gotB:
		if want := (liveGot{7, `{"id":1}`}); g != want {
			t.Fatalf("message on b: got %+v, want %+v (the device event went to the messages?)", g, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message never reached b")
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(devices) != 0 || len(gotB) != 0 {
		t.Fatalf("more than one event each: %d device, %d message", len(devices), len(gotB))
	}
}
