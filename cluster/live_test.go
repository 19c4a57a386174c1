package cluster_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
)

type liveGot struct {
	company uint64
	body    string
}

func startLive(t *testing.T, bus *cluster.Bus, queue int) (*cluster.Live, chan liveGot) {
	t.Helper()
	got := make(chan liveGot, 16)
	l, err := cluster.StartLive(bus, queue, func(company uint64, body []byte) error {
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
	la, gotA := startLive(t, a, 0)
	_, gotB := startLive(t, b, 0)

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
		t.Errorf("dropped %d events with room in the queue", n)
	}
}

func TestLiveDropsAndCountsWhatItCannotSend(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	l, _ := startLive(t, connect(t, url, "a"), 1)
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
	l, err := cluster.StartLive(bus, 0, func(uint64, []byte) error { return nil }, func() { gaps <- struct{}{} }, nil)
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
