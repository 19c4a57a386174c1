package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/store/postgres"
)

const beatNotWritten = `msg="node beat not written;`

// A break in the node's beats is one line at its first beat not written,
// then one a minute with how many were left out, and one line when a beat
// is written again; the next break starts with a line of its own.
func TestBeatLogSpacesABreak(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	b := &beatLog{log: slog.New(slog.NewTextHandler(logs, nil))}
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	gone := errors.New("store: the database does not answer")
	for i := range 31 { // a beat every 2 s for a minute
		b.failed(start.Add(time.Duration(i)*2*time.Second), gone, 10*time.Second)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], beatNotWritten) || !strings.Contains(lines[0], "suppressed=0") ||
		!strings.Contains(lines[1], beatNotWritten) || !strings.Contains(lines[1], "suppressed=29") {
		t.Fatalf("a minute of beats not written logged:\n%s\nwant a line at the first and one a minute later with suppressed=29", logs.String())
	}
	b.written(start.Add(62 * time.Second))
	b.written(start.Add(64 * time.Second))
	lines = strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], `msg="node beat written again" not_written=31 for=1m2s`) {
		t.Fatalf("beats written again logged:\n%s\nwant one line with how many were not written and for how long", logs.String())
	}
	b.failed(start.Add(66*time.Second), gone, 10*time.Second)
	if n := strings.Count(logs.String(), beatNotWritten); n != 3 {
		t.Fatalf("the first beat of a second break logged %d lines in all, want 3 (one of its own):\n%s", n, logs.String())
	}
}

// A single node on PostgreSQL whose database goes away logs its beats not
// written once, not every 2 s, and says when they are written again.
func TestNodeBeatsThroughAnOutage(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st, err := postgres.Open(context.Background(), relay.URL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := joinCluster(ctx, clusterConfig{nodeName: "solo", liveWithin: minNodeLiveWithin}, nil, st, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); n.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	relay.Cut()
	poll.Until(t, "3 beats not written", func() bool { return n.beatLog.missed.Load() >= 3 })
	if c := strings.Count(logs.String(), beatNotWritten); c != 1 {
		t.Fatalf("3 beats not written logged %d lines, want 1:\n%s", c, logs.String())
	}
	relay.Resume()
	poll.Until(t, "the line of beats written again", func() bool { return strings.Contains(logs.String(), `msg="node beat written again"`) })
	if c := strings.Count(logs.String(), beatNotWritten); c != 1 {
		t.Fatalf("the outage logged %d lines of beats not written, want 1:\n%s", c, logs.String())
	}
}
