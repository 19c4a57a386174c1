package main

import (
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
)

// The start-up rules of contract section 12 with real processes: a second
// node on one database without a bus is refused with a message naming the
// first; nodes with a bus each start, name themselves in logs and metrics,
// and a node's /readyz follows its bus.
func TestClusterStartRules(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	db := pgtest.URL(t)
	st := testStore{dir: t.TempDir(), databaseURL: db}

	alone := startServer(t, bin, st, "--node-name", "alone")
	// Its stderr reaches the buffer through a pipe, so the log line may come
	// after the stdout line startServer waited for.
	var line string
	poll.Within(t, 10*time.Second, "the start's log line", func() bool {
		line = listeningLine(alone.stderr.String())
		return line != ""
	})
	if strings.Count(line, "node=") != 1 {
		t.Errorf("the start's log line should name the node once: %s", line)
	}
	out, err := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", db, "--node-name", "second").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `alone\" runs on this database without a bus, and so would this one: two nodes on one database need --nats-url each`) {
		t.Fatalf("second node without a bus: err %v, output:\n%s", err, out)
	}
	stopServer(t, alone)

	nats := natstest.New(t)
	t.Cleanup(nats.Shutdown)
	a := startServer(t, bin, st, "--node-name", "a", "--nats-url", nats.ClientURL())
	// b is started with another API rate than a, as a node whose flags were
	// not copied: both serve, and each names the other and the setting.
	b := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "b", "--nats-url", nats.ClientURL(), "--rate-general", "500/1m")
	out, err = exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", db, "--node-name", "c").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "runs on this database with a bus, and this one has none: give this node the cluster's --nats-url") {
		t.Fatalf("third node without a bus: err %v, output:\n%s", err, out)
	}
	if !strings.Contains(b.stderr.String(), "node=b") {
		t.Errorf("b's log does not name it:\n%s", b.stderr.String())
	}
	if code, body := get(t, b.url+"/metrics", ""); code != http.StatusOK || !strings.Contains(string(body), `simrelay_node_info{bus="on",node="b"} 1`) {
		t.Errorf("b's metrics: %d, no simrelay_node_info for b", code)
	} else if !strings.Contains(string(body), "simrelay_cluster_clock_offset_seconds 0") {
		// One machine, one clock: the node runs on its own (cluster.Clock).
		t.Errorf("b's metrics: no simrelay_cluster_clock_offset_seconds 0")
	}
	var other string
	poll.Within(t, 10*time.Second, "a's warning of b's other settings", func() bool {
		other = logLine(a.stderr.String(), "a node runs with other settings than this one")
		return other != ""
	})
	// Neither node was given --public-url: each defaults to its own listen
	// address, which phones and e-mailed links would then name: a
	// difference too.
	if !strings.Contains(other, `other=b settings="public-url, rate-general"`) {
		t.Errorf("a's warning should name b and its other setting: %s", other)
	}
	if code, body := get(t, a.url+"/metrics", ""); code != http.StatusOK || !strings.Contains(string(body), "simrelay_cluster_nodes_other_settings 1") {
		t.Errorf("a's metrics: %d\n%s", code, grepLines(string(body), "other_settings"))
	}
	for _, s := range []*server{a, b} {
		if code, body := get(t, s.url+"/readyz", ""); code != http.StatusOK {
			t.Fatalf("readyz %d %s, want ready", code, body)
		}
	}
	nats.Shutdown()
	poll.Within(t, 15*time.Second, "b unready once its bus is gone", func() bool {
		code, _ := get(t, b.url+"/readyz", "")
		return code == http.StatusServiceUnavailable
	})
	// The bus's own lines name the node too, and their component once: a
	// bus lost by one node of three must be told apart in the logs.
	var lost string
	poll.Within(t, 10*time.Second, "b's log of the lost bus", func() bool {
		lost = logLine(b.stderr.String(), "bus disconnected")
		return lost != ""
	})
	if !strings.Contains(lost, "node=b") || strings.Count(lost, "component=") != 1 {
		t.Errorf("b's line of the lost bus should name b and its component once: %s", lost)
	}
}

// logLine is the first line of a server's log holding msg, or "".
func logLine(log, msg string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, msg) {
			return l
		}
	}
	return ""
}

// stopServer stops a server with SIGTERM and waits for it to exit.
func stopServer(t *testing.T, s *server) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not stop within 30s:\n%s", s.stderr.String())
	}
}

// A node killed and started again at once sees its own last beat: it waits
// for the beat to age instead of refusing its own name (or, for a node
// without a bus, the dead node's), and a second process given a live
// node's name is refused.
func TestClusterNodeRestartsUnderItsName(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	db := pgtest.URL(t)
	nats := natstest.Start(t)
	a := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "a", "--nats-url", nats, "--node-live-window", testLiveWindow)
	out, err := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", db, "--node-name", "a", "--nats-url", nats, "--node-live-window", testLiveWindow).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `a live node is named \"a\" already`) {
		t.Fatalf("a second process named a: err %v, output:\n%s", err, out)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	again := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "a", "--nats-url", nats, "--node-live-window", testLiveWindow)
	if code, _ := get(t, again.url+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("a restarted: readyz %d", code)
	}
	// A single node killed and replaced by one under another name and
	// without a bus (a restart on another port, say) starts too, once the
	// dead node's beat has aged.
	if err := again.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = again.cmd.Wait()
	other := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "b", "--node-live-window", testLiveWindow)
	if code, _ := get(t, other.url+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("b after a died: readyz %d", code)
	}
}

// listeningLine is the server's "simrelay listening" log line, or "".
func listeningLine(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg="simrelay listening"`) {
			return line
		}
	}
	return ""
}
