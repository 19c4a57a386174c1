package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
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
	// muted: a connection accepted from then on is kept open and never
	// answered, as a server that accepts TCP and stays silent (a
	// half-dead process, a listener behind a stopped proxy); held counts
	// those connections.
	muted atomic.Bool
	held  atomic.Int32
	mu    sync.Mutex
	conns []net.Conn
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
			if r.muted.Load() {
				r.mu.Lock()
				r.conns = append(r.conns, c)
				r.mu.Unlock()
				r.held.Add(1)
				continue
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
// silence mutes the server and cuts the bus's connection, and returns
// once the bus is reconnecting to the now silent server: its handshake
// holds the client's lock for the connect timeout.
func (r *stallRelay) silence(t *testing.T) {
	t.Helper()
	r.muted.Store(true)
	r.cut()
	poll.Until(t, "the bus reconnecting to the silent server", func() bool { return r.held.Load() > 0 })
}

func (r *stallRelay) shut() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
}

// cut ends every connection forwarded so far, the listener staying open:
// the client finds its connection at an end and reconnects.
func (r *stallRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
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
	// which Close would give up on after its bounds (2 s), logged.
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

// A publish does not wait while the client reconnects to a server that
// accepts the connection and never answers: the client's handshake holds
// its lock for the connect timeout (10 s here, Connect's default), and a
// publish that took that lock waited it out with it, on the request path
// of every send, kick and release of the node. The publish here must
// return well within the handshake's timeout.
func TestPublishDoesNotWaitOnASilentReconnection(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	var out syncbuf.Buffer
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: relay.url(), Node: "a",
		Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// Shut before the bus closes (cleanups run last first), ending the
	// handshake under way.
	t.Cleanup(relay.shut)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	relay.silence(t)
	// The handshake under way holds the client's lock from its dial on;
	// the held connection was counted just after, so the publishes below
	// start within its 10 s. Past the queue's bound they are dropped.
	const bound = 2 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < cluster.QueueSize+100; i++ {
			b.Publish("signal", []byte("x"))
		}
	}()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("publishing during a silent server's handshake waited past %s (the handshake's timeout is %s)", bound, cluster.DefaultConnectTimeout)
	}
	if !strings.Contains(out.String(), `msg="bus: signal dropped" topic=signal err="the queue to the bus is full"`) {
		t.Errorf("signals past the queue's bound not dropped with a log line; the log:\n%s", out.String())
	}
}

// What is published while the client reconnects to a silent server waits
// in the bus's queue and reaches the other nodes once the client is
// connected again, in the order published.
func TestSignalsQueuedDuringASilentReconnectionArriveInOrder(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	relay := newStallRelay(t, url[len("nats://"):])
	// A short connect timeout: the handshake with the silent server ends
	// after it, and the next one is forwarded.
	a, err := cluster.Connect(context.Background(), cluster.Config{URL: relay.url(), Node: "a", ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	t.Cleanup(relay.shut)
	b := connect(t, url, "b")
	var mu sync.Mutex
	var got []string
	if err := b.Subscribe("seq", func(m cluster.Message) {
		mu.Lock()
		got = append(got, string(m.Data))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*cluster.Bus{a, b} {
		if err := n.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	relay.silence(t)
	const n = 200
	var want []string
	for i := range n {
		want = append(want, strconv.Itoa(i))
		a.Publish("seq", []byte(want[i]))
	}
	relay.muted.Store(false)
	poll.Within(t, 30*time.Second, "the signals reaching the other node", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("heard %v, want 0 to %d in order", got, n-1)
	}
}

// Close does not wait out a reconnection's handshake with a server that
// accepted the connection and stays silent: the client's own Close waits
// for its lock, which the handshake holds for the connect timeout (10 s
// here). Close returns within its bounds (a second for what is queued,
// a second more to leave), saying so in the log with the signals it left
// unsent, each counted as dropped where its publisher counts them, and
// the client leaves once the handshake ends. Before, those signals were
// named in the log only.
func TestCloseDoesNotWaitOutASilentReconnection(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	var out syncbuf.Buffer
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: relay.url(), Node: "a",
		Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	relay.silence(t)
	// The sender takes a first signal and waits on the client's lock with
	// it; those after it wait in the queue.
	b.Publish("signal", []byte("x"))
	poll.Until(t, "the sender waiting with a signal", func() bool { return b.Waiting() == 0 })
	const queued = 10
	var tally atomic.Uint64
	for range queued {
		b.PublishCounted("signal", []byte("x"), &tally)
	}
	const bound = 5 * time.Second
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatalf("Close during a silent server's handshake waited past %s (the handshake's timeout is %s)", bound, cluster.DefaultConnectTimeout)
	}
	if !strings.Contains(out.String(), "bus: closed while the client still waits on the server") ||
		!strings.Contains(out.String(), "unsent="+strconv.Itoa(queued)) {
		t.Errorf("Close's early return not logged with %d signals unsent; the log:\n%s", queued, out.String())
	}
	if n := tally.Load(); n != queued {
		t.Errorf("%d of the %d signals left unsent counted as dropped", n, queued)
	}
}

// A question to the other nodes (a cache dropped on every node, as a key
// rotation asks) ends with its context while the client reconnects to a
// silent server: the client's lock, held by the handshake for the connect
// timeout (10 s here), does not hold the request that asks.
func TestAskEndsWithItsContextDuringASilentReconnection(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	b := connect(t, relay.url(), "a")
	t.Cleanup(relay.shut)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	relay.silence(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	type result struct {
		missing []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		m, err := b.Ask(ctx, "cache.x", []byte("k"), []string{"b"})
		done <- result{m, err}
	}()
	const bound = 3 * time.Second
	select {
	case r := <-done:
		if r.err == nil || !slices.Equal(r.missing, []string{"b"}) {
			t.Fatalf("Ask answered %v, %v; want b missing and an error", r.missing, r.err)
		}
	case <-time.After(bound):
		t.Fatalf("Ask with a 500 ms context waited past %s during a silent server's handshake", bound)
	}
}

// Readiness (/readyz) answers within its context while the client
// reconnects to a silent server, whose handshake holds the client's lock
// for the connect timeout (10 s here): not ready, at once.
func TestReadyEndsWithItsContextDuringASilentReconnection(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	b := connect(t, relay.url(), "a")
	t.Cleanup(relay.shut)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	relay.silence(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Ready(ctx) }()
	const bound = 3 * time.Second
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("ready during a silent server's handshake")
		}
	case <-time.After(bound):
		t.Fatalf("Ready with a 500 ms context waited past %s during a silent server's handshake", bound)
	}
}

// Connected answers at once while the client reconnects to a server that
// accepts the connection and never answers: the handshake holds the
// client's lock for the connect timeout (10 s here), and the node's beat,
// which asks Connected, would otherwise wait as long (other nodes count a
// node dead 10 s after its last beat).
func TestConnectedDoesNotWaitOutASilentReconnection(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	b := connect(t, relay.url(), "a")
	t.Cleanup(relay.shut)
	if !b.Connected() {
		t.Fatal("not connected once Connect returned")
	}
	relay.silence(t)
	answer := make(chan bool, 1)
	go func() { answer <- b.Connected() }()
	select {
	case up := <-answer:
		if up {
			t.Error("connected while its only server is silent")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Connected waited past 5 s for a silent server's handshake (its timeout is %s)", cluster.DefaultConnectTimeout)
	}
	// The server answers again, and the silent connection ends: the client
	// reconnects then, not once its handshake timed out (10 s here; the
	// signals' test above waits a handshake's timeout out).
	relay.muted.Store(false)
	relay.cut()
	poll.Within(t, 30*time.Second, "connected again once the server answers", b.Connected)
}

// Live's Close, which a node's shutdown calls before the bus's, does not
// wait out a reconnection's handshake with a silent server: Live's
// goroutine looks for the bus's reconnections (every second) in a count
// the bus keeps itself. Before, it asked the client's statistics, under
// the client's lock, which the handshake holds for the connect timeout
// (10 s here), and Close waited for it.
func TestLiveCloseDoesNotWaitOutASilentReconnection(t *testing.T) {
	t.Parallel()
	relay := newStallRelay(t, natstest.Start(t)[len("nats://"):])
	b := connect(t, relay.url(), "a")
	t.Cleanup(relay.shut)
	l, err := cluster.StartLive(b, func(uint64, []byte) error { return nil }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	relay.silence(t)
	// A look begun during the handshake.
	looks := l.Looks()
	poll.Until(t, "Live looking at the bus during the handshake", func() bool { return l.Looks() > looks })
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	const bound = 5 * time.Second
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatalf("Live's Close during a silent server's handshake waited past %s (the handshake's timeout is %s)", bound, cluster.DefaultConnectTimeout)
	}
}
