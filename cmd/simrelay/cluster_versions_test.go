package main

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
)

// Two nodes of different simrelay builds (the version is set at link
// time, -X main.version, as a release sets it) on one database and bus
// both serve, and each notices the other's build at its beats: one WARN
// naming the other node and its version, /metrics counting the live nodes
// by version; once the other node stops, one INFO says the versions agree
// again and its version's series is gone. Nothing said so before.
func TestClusterNoticesMixedVersions(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	const older = versionedRelease
	other := versionedBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	own := strings.TrimSpace(strings.TrimPrefix(string(out), "simrelay "))
	if own == older {
		t.Fatalf("the test's builds share the version %q", own)
	}
	db := pgtest.URL(t)
	nats := natstest.New(t)
	t.Cleanup(nats.Shutdown)
	a := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "a", "--nats-url", nats.ClientURL(), "--node-live-window", testLiveWindow)
	b := startServer(t, other, testStore{dir: t.TempDir(), databaseURL: db}, "--node-name", "b", "--nats-url", nats.ClientURL(), "--node-live-window", testLiveWindow)
	const warn = "nodes of another simrelay version run on this database"
	// A node judges the registry once its beats ran a live window.
	poll.Within(t, 40*time.Second, "each node warns of the other's version", func() bool {
		return strings.Contains(a.stderr.String(), warn) && strings.Contains(b.stderr.String(), warn)
	})
	for _, c := range []struct {
		s          *server
		mine, them string
	}{{a, own, "b (" + older + ")"}, {b, older, "a (" + own + ")"}} {
		var lines []string
		for _, l := range strings.Split(c.s.stderr.String(), "\n") {
			if strings.Contains(l, warn) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], c.them) || !strings.Contains(lines[0], "version="+c.mine) {
			t.Errorf("the node of %s logged %d warnings, want one WARN naming %s:\n%s", c.mine, len(lines), c.them, strings.Join(lines, "\n"))
		}
	}
	metrics := func() string {
		code, body := get(t, a.url+"/metrics", "")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		return string(body)
	}
	if m := metrics(); !strings.Contains(m, `simrelay_cluster_nodes{version="`+older+`"} 1`) || !strings.Contains(m, `simrelay_cluster_nodes{version="`+own+`"} 1`) {
		t.Errorf("a's /metrics do not count one node of each version:\n%s", grepLines(m, "simrelay_cluster_nodes"))
	}
	if code, body := get(t, b.url+"/readyz", ""); code != http.StatusOK {
		t.Errorf("the older node's /readyz: %d %s, want ready: mixed versions are not refused", code, body)
	}
	stopServer(t, b)
	const agree = "every live node runs this simrelay version again"
	poll.Within(t, 30*time.Second, "a says the versions agree again", func() bool {
		return strings.Contains(a.stderr.String(), agree)
	})
	if m := metrics(); strings.Contains(m, older) || !strings.Contains(m, `simrelay_cluster_nodes{version="`+own+`"} 1`) {
		t.Errorf("a's /metrics once b stopped:\n%s", grepLines(m, "simrelay_cluster_nodes"))
	}
}

// grepLines are the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
