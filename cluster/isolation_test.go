package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store/postgres"
)

// joinDatabase connects node to the bus at url as a node of the cluster
// whose database is db does: on that database's subjects (Prefix).
func joinDatabase(t *testing.T, url, db, node string) *Bus {
	t.Helper()
	st, err := postgres.Open(context.Background(), db, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	prefix, err := Prefix(st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Connect(context.Background(), Config{URL: url, Node: node, Prefix: prefix})
	if err != nil {
		t.Fatalf("connect %s: %v", node, err)
	}
	t.Cleanup(b.Close)
	return b
}

// Two clusters (two databases) on one NATS server hear nothing of each
// other, while the nodes of each hear each other: a live event of company 1
// in one never reaches the live views of company 1 in the other, a
// disconnect of a fingerprint in one closes no link of that fingerprint in
// the other, and each one's census lists its own nodes only. Before, every
// cluster said and heard the same subjects ("simrelay.<topic>").
func TestClustersSharingABusHearOnlyTheirOwnNodes(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	dbA, dbB := pgtest.URL(t), pgtest.URL(t)
	a1, a2 := joinDatabase(t, url, dbA, "a1"), joinDatabase(t, url, dbA, "a2")
	b1, b2 := joinDatabase(t, url, dbB, "b1"), joinDatabase(t, url, dbB, "b2")
	if a1.prefix != a2.prefix || b1.prefix != b2.prefix || a1.prefix == b1.prefix {
		t.Fatalf("prefixes a1 %q a2 %q b1 %q b2 %q: want one per database", a1.prefix, a2.prefix, b1.prefix, b2.prefix)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)

	// Live views: each node delivers what it hears to its own tabs.
	type event struct {
		company uint64
		body    string
	}
	lives := map[string]*Live{}
	got := map[string]chan event{}
	for _, b := range []*Bus{a1, a2, b1, b2} {
		ch := make(chan event, 16)
		l, err := StartLive(b, func(company uint64, body []byte) error {
			ch <- event{company, string(body)}
			return nil
		}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		if err := b.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		lives[b.Node()], got[b.Node()] = l, ch
	}
	next := func(node string) event {
		t.Helper()
		select {
		case e := <-got[node]:
			return e
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing reached %s's live views", node)
			return event{}
		}
	}
	// a1's event reaches a2 (so the server routed it), then b2's reaches
	// b1: had a1's reached b1, it would be there before b2's.
	lives["a1"].Offer(1, []byte(`{"from":"a"}`))
	if e := next("a2"); e != (event{1, `{"from":"a"}`}) {
		t.Fatalf("a2 heard %+v, want a1's event", e)
	}
	lives["b2"].Offer(1, []byte(`{"from":"b"}`))
	if e := next("b1"); e != (event{1, `{"from":"b"}`}) {
		t.Fatalf("b1's live views of company 1 got %+v: another cluster's event", e)
	}
	lives["a1"].Offer(1, []byte(`{"from":"a","n":2}`))
	if e := next("a2"); e != (event{1, `{"from":"a","n":2}`}) {
		t.Fatalf("a2's live views of company 1 got %+v: another cluster's event", e)
	}

	// Controls: a disconnect of phone-1 in A closes a2's link of phone-1,
	// never b1's link of the same fingerprint.
	hubs := map[string]*stuckHub{}
	for _, b := range []*Bus{a2, b1} {
		hub := &stuckHub{Hub: gateway.New(gateway.Config{}, nil, nil, log, time.Now), stuck: make(chan struct{}), told: map[string]bool{}}
		g, err := NewGateway(GatewayConfig{Bus: b, Hub: hub, Live: time.Second, SweepEvery: time.Hour, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		gctx, gcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); g.Run(gctx) }()
		t.Cleanup(func() { close(hub.stuck); gcancel(); <-done })
		hubs[b.Node()] = hub
	}
	disconnect := func(b *Bus, fp string) {
		t.Helper()
		data, err := json.Marshal(ctl{Op: "disconnect", Fingerprint: fp, Code: 4503, Reason: "device disabled"})
		if err != nil {
			t.Fatal(err)
		}
		b.Publish(topicCtl, data)
	}
	disconnect(a1, "phone-1")
	poll.Within(t, 10*time.Second, "a2 closes phone-1's link", func() bool { return hubs["a2"].heard("disconnect phone-1") })
	disconnect(b2, "phone-b")
	poll.Within(t, 10*time.Second, "b1 closes phone-b's link", func() bool { return hubs["b1"].heard("disconnect phone-b") })
	if hubs["b1"].heard("disconnect phone-1") {
		t.Error("a disconnect of phone-1 in cluster A closed cluster B's link of phone-1")
	}

	// The census: each node lists the other node of its database only.
	const every = 100 * time.Millisecond
	peers := map[string]*Peers{}
	for _, b := range []*Bus{a1, a2, b1, b2} {
		p, err := NewPeers(b, every, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		go p.Run(ctx)
		peers[b.Node()] = p
	}
	// A watcher on B's subjects counts B's beats, so that A's census is
	// read after B's nodes beat many times over.
	watch := joinDatabase(t, url, dbB, "watch")
	var beats atomic.Int64
	if err := watch.Subscribe(topicAlive, func(Message) { beats.Add(1) }); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a1": {"a2"}, "a2": {"a1"}, "b1": {"b2"}, "b2": {"b1"}}
	poll.Within(t, 10*time.Second, "each node knows the other of its database", func() bool {
		for n, w := range want {
			if !slices.Equal(peers[n].Live(), w) {
				return false
			}
		}
		return true
	})
	poll.Within(t, 10*time.Second, "B's nodes beat ten times", func() bool { return beats.Load() >= 10 })
	for _, b := range []*Bus{a1, a2, b1, b2} {
		if err := b.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for n, w := range want {
		if got := peers[n].Live(); !slices.Equal(got, w) {
			t.Errorf("%s's census: %v, want %v", n, got, w)
		}
	}
}
