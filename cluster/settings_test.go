package cluster_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
)

// atOnce bounds what the settings' tests call at once: far below their
// period (an hour), and roomy for a machine busy with other tests (5 s was
// missed on two cores running six of the package's tests at once).
const atOnce = 30 * time.Second

// settingsNode joins the bus as name, says own as its settings (with a
// period of an hour: what is heard at once comes of the newcomer's ask) and
// logs into its buffer until the test ends.
func settingsNode(t *testing.T, url, name string, own map[string]string) (*cluster.Settings, *syncbuf.Buffer) {
	t.Helper()
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: name})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	var buf syncbuf.Buffer
	s, err := cluster.NewSettings(b, own, time.Hour, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; b.Close() })
	return s, &buf
}

// Nodes say their shared settings on the bus: a node started with another
// rate or secret is named by every node that hears it, with the names of
// the settings that differ (never a secret's value), at once, not a
// period later; nodes that agree say nothing, and a setting only one node
// has (another build's) is not a difference.
func TestSettingsNameTheNodesThatDiffer(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	key := []byte("the cluster's key")
	own := map[string]string{"rate-general": "100/1m0s", "admin-token": cluster.Digest(key, "a-long-random-token"), "public-url": "https://sms.example.com"}
	a, aLog := settingsNode(t, url, "a", own)
	_, bLog := settingsNode(t, url, "b", map[string]string{"rate-general": "100/1m0s", "admin-token": cluster.Digest(key, "a-long-random-token"), "public-url": "https://sms.example.com", "newer-setting": "x"})
	odd := map[string]string{"rate-general": "500/1m0s", "admin-token": cluster.Digest(key, "another-token"), "public-url": "https://sms.example.com"}
	_, cLog := settingsNode(t, url, "c", odd)
	const warn = "a node runs with other settings than this one"
	// At once: within atOnce, where the period is an hour.
	poll.Within(t, atOnce, "a, b and c warn of the other settings", func() bool {
		return strings.Count(aLog.String(), warn) == 1 && strings.Count(bLog.String(), warn) == 1 && strings.Count(cLog.String(), warn) == 2
	})
	for name, log := range map[string]string{"a": aLog.String(), "b": bLog.String()} {
		if !strings.Contains(log, `other=c settings="admin-token, rate-general"`) {
			t.Errorf("%s's log does not name c and the settings:\n%s", name, log)
		}
	}
	if c := cLog.String(); !strings.Contains(c, "other=a ") || !strings.Contains(c, "other=b ") || strings.Contains(c, "another-token") || strings.Contains(c, "newer-setting") {
		t.Errorf("c's log should name a and b, and neither a secret nor a setting of one side:\n%s", c)
	}
	if n := a.Differ(); n != 1 {
		t.Errorf("a counts %d nodes with other settings, want 1 (c)", n)
	}
}

// A node restarted with the same odd settings is judged afresh: the nodes
// that hear it warn again as it starts, not only at its first start (its
// previous run is still in their memory for three periods).
func TestSettingsJudgeARestartedNodeAfresh(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	_, aLog := settingsNode(t, url, "a", map[string]string{"rate-general": "100/1m0s"})
	start := func() (stop func()) {
		b, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: "c"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := cluster.NewSettings(b, map[string]string{"rate-general": "500/1m0s"}, time.Hour, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		return func() { cancel(); <-done; b.Close() }
	}
	const warn = "a node runs with other settings than this one"
	stop := start()
	poll.Within(t, atOnce, "a warns of c", func() bool { return strings.Count(aLog.String(), warn) == 1 })
	stop()
	stop = start()
	defer stop()
	poll.Within(t, atOnce, "a warns of c again as it restarts with the same settings", func() bool {
		return strings.Count(aLog.String(), warn) == 2
	})
}
