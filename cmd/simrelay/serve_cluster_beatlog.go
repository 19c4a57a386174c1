package main

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/simrelay/simrelay/internal/logspacing"
)

// beatLogEvery spaces the lines of beats the database did not take: a
// node beats every 2 s, which through an outage of an hour would be 1,800
// lines saying the same.
const beatLogEvery = time.Minute

// beatLog tells the operator of the node's beats the database did not
// take: one line at the first of a break, then one per beatLogEvery with
// how many were left out (suppressed=), and one line once a beat is
// written again, with how many were not and for how long. The beat loop
// (clusterNode.run) owns it.
type beatLog struct {
	log *slog.Logger
	// spacing spaces the lines of the break under way; nil between breaks.
	spacing *logspacing.Spacer
	// since is when the break under way began.
	since time.Time
	// missed counts the beats not written in the break under way; read by
	// the tests.
	missed atomic.Int64
}

// failed records a beat the database did not take (err), at now; live is
// the live window, after which the other nodes take this one for dead.
func (b *beatLog) failed(now time.Time, err error, live time.Duration) {
	if b.spacing == nil {
		b.spacing, b.since = new(logspacing.Spacer), now
	}
	b.missed.Add(1)
	if suppressed, ok := b.spacing.Due(now, beatLogEvery); ok {
		b.log.Warn("node beat not written; other nodes take this one for dead after the live window", "err", err, "live_window", live, "suppressed", suppressed)
	}
}

// written records a beat the database took, at now: the end of a break,
// if one was under way.
func (b *beatLog) written(now time.Time) {
	if b.spacing == nil {
		return
	}
	b.log.Info("node beat written again", "not_written", b.missed.Load(), "for", now.Sub(b.since).Round(time.Millisecond))
	b.spacing = nil
	b.missed.Store(0)
}
