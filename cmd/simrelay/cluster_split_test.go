package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
)

// testLiveWindow is the --node-live-window of the cluster tests that wait
// for a node to be steady or another to be dead: the default's 10 s made
// each of them take 15 to 30 s. 4 s keeps a beat every 800 ms and lets a
// beat be 2 s late (cluster.Beats) on a loaded machine with the race
// detector; what the tests assert does not depend on the window's length.
const testLiveWindow = "4s"

// Two nodes on one database given two NATS servers (a --nats-url typed
// differently on one node) both start and serve, but hear nothing of each
// other: every signal between them is lost. Each says so once its beats
// are steady and the other was unheard for the live window: a WARN naming
// the other, and simrelay_cluster_nodes_unheard 1. Nothing said so before:
// sends between them waited for the link sweep, silently.
func TestClusterNoticesSplitBus(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	db := pgtest.URL(t)
	a := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "a", "--nats-url", natstest.Start(t), "--node-live-window", testLiveWindow)
	b := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "b", "--nats-url", natstest.Start(t), "--node-live-window", testLiveWindow)
	const warn = "not heard on this node's bus"
	// The live window of steady beats, then the grace (as long).
	poll.Within(t, 45*time.Second, "each node warns that it does not hear the other", func() bool {
		return strings.Contains(a.stderr.String(), warn) && strings.Contains(b.stderr.String(), warn)
	})
	for _, c := range []struct {
		s    *server
		them string
	}{{a, "unheard=b "}, {b, "unheard=a "}} {
		if l := logLine(c.s.stderr.String(), warn); !strings.Contains(l, "level=WARN") || !strings.Contains(l, c.them) {
			t.Errorf("want a WARN naming the other node (%s): %s", c.them, l)
		}
	}
	if code, body := get(t, a.url+"/metrics", ""); code != http.StatusOK || !strings.Contains(string(body), "simrelay_cluster_nodes_unheard 1") {
		t.Errorf("a's /metrics: %d\n%s", code, grepLines(string(body), "unheard"))
	}
}
