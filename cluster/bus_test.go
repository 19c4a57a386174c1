package cluster_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/syncbuf"
)

func connect(t *testing.T, url, node string) *cluster.Bus {
	t.Helper()
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: node})
	if err != nil {
		t.Fatalf("connect %s: %v", node, err)
	}
	t.Cleanup(b.Close)
	return b
}

func TestBusCarriesToOtherNodesOnly(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	a, b := connect(t, url, "a"), connect(t, url, "b")
	got := make(chan cluster.Message, 4)
	for _, n := range []*cluster.Bus{a, b} {
		name := n.Node()
		if err := n.Subscribe("kick.>", func(m cluster.Message) {
			got <- cluster.Message{Topic: name + " " + m.Topic, Data: m.Data}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if err := b.Ready(context.Background()); err != nil { // its subscription is on the server
		t.Fatalf("ready: %v", err)
	}
	a.Publish("kick.dev.7", []byte("x"))
	select {
	case m := <-got:
		if m.Topic != "b kick.dev.7" || string(m.Data) != "x" {
			t.Fatalf("got %q %q, want b hearing kick.dev.7 x", m.Topic, m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b heard nothing within 10s")
	}
	// a does not hear itself: a second message from b arrives at a, and
	// nothing else is queued before it.
	b.Publish("kick.dev.8", nil)
	select {
	case m := <-got:
		if m.Topic != "a kick.dev.8" {
			t.Fatalf("got %q, want a hearing kick.dev.8 (a must not hear its own kick.dev.7)", m.Topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a heard nothing within 10s")
	}
}

func TestBusRefusesToStartWithoutServer(t *testing.T) {
	t.Parallel()
	s := natstest.New(t)
	url := s.ClientURL()
	s.Shutdown()
	_, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: "a", ConnectTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("connected to a stopped server")
	}
}

func TestBusReadyFollowsTheServer(t *testing.T) {
	t.Parallel()
	s := natstest.New(t)
	b := connect(t, s.ClientURL(), "a")
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	s.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for b.Ready(context.Background()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("still ready 10s after the server stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  cluster.Config
		want string
	}{
		{cluster.Config{URL: "", Node: "a"}, "no NATS server"},
		{cluster.Config{URL: "http://x:4222", Node: "a"}, "want nats://"},
		{cluster.Config{URL: "nats://x:4222", Node: "a.b"}, "node name"},
		{cluster.Config{URL: "nats://x:4222,nats://y:4222", Node: "a", Prefix: "p>"}, "prefix"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.cfg, err, c.want)
		}
	}
	if err := (cluster.Config{URL: "nats://u:p@127.0.0.1:4222, nats://127.0.0.1:4223", Node: "node-1"}).Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

// A refused --nats-url is shown without the password it may hold (the
// operator passes it through the environment so that it stays out of logs),
// and an empty server in the list is named as such.
func TestConfigValidateHidesPasswords(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"nats//simrelay:s3cret@127.0.0.1:4222", "nats://simrelay:s3cret@a:4222,http://simrelay:s3cret@b:4222", "tcp://s3cret@c:4222"} {
		err := (cluster.Config{URL: u, Node: "a"}).Validate()
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "want nats://") {
			t.Errorf("%s: got %v, want a refusal without the password", u, err)
		}
	}
	// A comma in a user name or password splits the server there, as the
	// NATS client splits the list: the part before the comma was shown as
	// the server refused, with the start of the password in it.
	for _, u := range []string{"nats://simrelay:s3c,r3t@127.0.0.1:4222", "nats://b:4222,nats://simrelay:s3c,r3t@127.0.0.1:4222"} {
		err := (cluster.Config{URL: u, Node: "a"}).Validate()
		if err == nil || strings.Contains(err.Error(), "s3c") || strings.Contains(err.Error(), "r3t") || !strings.Contains(err.Error(), "%2C") {
			t.Errorf("%s: got %v, want a refusal without the password that says how to write a comma", u, err)
		}
	}
	if err := (cluster.Config{URL: "nats://a:4222,,nats://b:4222", Node: "a"}).Validate(); err == nil || !strings.Contains(err.Error(), "empty server") {
		t.Errorf("an empty server in the list: got %v, want it named", err)
	}
}

// With the bus gone and the reconnection buffer full, every publish fails:
// the node says so once, then at most once every 10 s, counting the
// signals it left out of the log. Before, each dropped signal had its
// line: under traffic (kicks, live events, the census) hundreds a second.
func TestDroppedSignalsAreLoggedSpaced(t *testing.T) {
	t.Parallel()
	s := natstest.New(t)
	var out syncbuf.Buffer
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: s.ClientURL(), Node: "a",
		Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for b.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("still connected 10 s after the server stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	body := make([]byte, 64<<10)
	for range 400 { // 25 MiB: past the 8 MiB the client keeps meanwhile
		b.Publish("flood", body)
	}
	if got := strings.Count(out.String(), "signal dropped"); got != 1 {
		t.Errorf("lines of signals dropped: got %d, want 1:\n%s", got, out.String())
	}
}
