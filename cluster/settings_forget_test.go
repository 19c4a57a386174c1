package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
)

// A node forgets the settings of a node it has not heard for three periods
// on its own, not only when /metrics asks (Differ): a cluster nobody
// scrapes does not keep every node it ever heard.
func TestSettingsForgetQuietNodes(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	start := func(name string) (*Settings, func()) {
		b, err := Connect(context.Background(), Config{URL: url, Node: name})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSettings(b, map[string]string{"rate-general": name}, 20*time.Millisecond, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				cancel()
				<-done
				b.Close()
			}
		}
		t.Cleanup(stop)
		return s, stop
	}
	a, _ := start("a")
	_, stopB := start("b")
	knows := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, ok := a.others["b"]
		return ok
	}
	poll.Until(t, "a hears b", knows)
	stopB()
	poll.Until(t, "a forgets b's settings once b is quiet (periods of 20 ms)", func() bool { return !knows() })
}
