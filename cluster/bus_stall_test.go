package cluster_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
)

// stallRelay forwards TCP connections to a server until Stall: from then
// on it reads nothing either way and keeps every connection open, as a
// network cut between a node and its NATS server does where no reset
// comes (a host powered off behind a firewall, a partition): what the node
// writes fills the connection's buffers, then its writes wait.
type stallRelay struct {
	ln      net.Listener
	to      string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallRelay(t *testing.T, to string) *stallRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &stallRelay{ln: ln, to: to}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			go r.copy(s, c)
			go r.copy(c, s)
		}
	}()
	t.Cleanup(r.shut)
	return r
}

// shut closes the relay's listener and every connection it forwards: a
// client then finds the server gone at once (a connection refused, or its
// connection at an end), where a stalled relay left it waiting.
func (r *stallRelay) shut() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
}

func (r *stallRelay) url() string { return "nats://" + r.ln.Addr().String() }

// copy forwards src to dst, reading nothing while the relay is stalled.
func (r *stallRelay) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		for r.stalled.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			return
		}
	}
}

// A publish never waits long on a bus that went silent: once the
// connection's buffers are full, a write that does not complete within the
// bus's write timeout ends the connection, and what is published then waits
// in the reconnection buffer. Before, the client waited for its default
// minute on each such write, holding its lock: every publish of the node
// (a link's registration among them, which tells the others) waited with
// it.
func TestPublishDoesNotWaitOnASilentBus(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	b := connect(t, relay.url(), "a")
	// Shut before the bus closes (cleanups run last first): the client
	// reconnects after the write timeout, and its handshake with the
	// stalled relay holds the client's lock for the connect timeout (10 s),
	// which Close would wait out.
	t.Cleanup(relay.shut)
	relay.stalled.Store(true)
	body := make([]byte, 64<<10)
	const bound = 20 * time.Second
	var slowest time.Duration
	for i := 0; i < 2000; i++ { // 128 MB, far past any buffer of loopback
		start := time.Now()
		b.Publish("flood", body)
		slowest = max(slowest, time.Since(start))
		if slowest > bound {
			break
		}
	}
	if slowest > bound {
		t.Fatalf("a publish on a silent bus waited %s, want under %s", slowest, bound)
	}
	t.Logf("slowest publish: %s", slowest)
}

// A bus that went silent while the node writes little is noticed within
// the pings' bound (15 s with Connect's pings): the connection counts as
// lost, and reconnects once the bus answers again (the node's live views
// then reload). Before, the client's default pings took 4 to 6 minutes to
// notice, meanwhile hearing nothing. The node here pings every 500 ms, its
// bound 1.5 s, so that the test does not wait out 15 s; the rest of the
// client's settings are Connect's.
func TestASilentBusIsNoticed(t *testing.T) {
	t.Parallel()
	if bound := cluster.PingBound(cluster.ProductionPings); bound > 15*time.Second {
		t.Fatalf("Connect's pings notice a silent bus within %s, want 15 s at most", bound)
	}
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	b, err := cluster.ConnectPingingEvery(context.Background(), cluster.Config{URL: relay.url(), Node: "a"}, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if !b.Connected() {
		t.Fatal("not connected at the start")
	}
	relay.stalled.Store(true)
	deadline := time.Now().Add(40 * time.Second)
	for b.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("a silent bus still counts as connected after 40 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The network back: the node is on its bus again, without a restart.
	relay.stalled.Store(false)
	deadline = time.Now().Add(40 * time.Second)
	for !b.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("not connected again within 40 s of the bus answering")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
