package cluster_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
)

// node is one node's bus, census and caches in a test.
type node struct {
	bus    *cluster.Bus
	peers  *cluster.Peers
	caches *cluster.Caches

	mu      sync.Mutex
	dropped []string // guarded by mu
}

// startNode joins the bus as name with a short census period, and drops
// the keys it is told to forget into dropped; it leaves when stop is called
// or the test ends.
func startNode(t *testing.T, url, name string) (n *node, stop func()) {
	t.Helper()
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: name})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	p, err := cluster.NewPeers(b, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	n = &node{bus: b, peers: p, caches: cluster.NewCaches(b, p, 2*time.Second)}
	if err := n.caches.OnForget("keys", func(k []byte) {
		n.mu.Lock()
		n.dropped = append(n.dropped, string(k))
		n.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	stop = sync.OnceFunc(func() { cancel(); <-done; b.Close() })
	t.Cleanup(stop)
	return n, stop
}

func (n *node) has(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.dropped, key)
}

// A Forget returns once every other live node dropped the key: when it
// returns, each has, with no waiting on the test's side.
func TestForgetReachesEveryNodeBeforeItReturns(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	a, _ := startNode(t, url, "a")
	b, _ := startNode(t, url, "b")
	c, _ := startNode(t, url, "c")
	poll.Until(t, "a knows b and c", func() bool { return slices.Equal(a.peers.Live(), []string{"b", "c"}) })

	if err := a.caches.Forget(context.Background(), "keys", []byte("k1")); err != nil {
		t.Fatalf("forget: %v", err)
	}
	if !b.has("k1") || !c.has("k1") {
		t.Errorf("after Forget returned: b dropped %v, c dropped %v; want both", b.has("k1"), c.has("k1"))
	}
	if a.has("k1") {
		t.Error("a heard its own question; it drops its own entry itself")
	}
}

// A node that left says so and is no longer waited for; a node that died
// without a word is waited for until the timeout, then named in the error.
func TestForgetWithNodesGone(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	a, _ := startNode(t, url, "a")
	_, stopB := startNode(t, url, "b")
	poll.Until(t, "a knows b", func() bool { return slices.Equal(a.peers.Live(), []string{"b"}) })
	stopB()
	poll.Until(t, "a forgets b, which said goodbye", func() bool { return len(a.peers.Live()) == 0 })
	if err := a.caches.Forget(context.Background(), "keys", []byte("k")); err != nil {
		t.Errorf("forget with no other node: %v", err)
	}

	// A node that stops answering (its handler fails) but is still alive on
	// the census: the asker gives up at the timeout with an error naming it.
	bus, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: "mute"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	if err := bus.Answer("cache.keys.forget", func(cluster.Message) error { return errors.New("the cache is busy") }); err != nil {
		t.Fatal(err)
	}
	mp, err := cluster.NewPeers(bus, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); mp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.Until(t, "a knows the mute node", func() bool { return slices.Equal(a.peers.Live(), []string{"mute"}) })
	short := cluster.NewCaches(a.bus, a.peers, 200*time.Millisecond)
	err = short.Forget(context.Background(), "keys", []byte("k"))
	if err == nil {
		t.Fatal("a Forget that a live node never confirmed returned no error")
	}
	if !strings.Contains(err.Error(), "[mute]") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the mute node named and the deadline passed", err)
	}
}
