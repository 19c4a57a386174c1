// Package wakeup holds what the durable outboxes (mail, webhook deliveries)
// share: the wake-up of the one worker that drains each of them.
package wakeup

import (
	"context"
	"time"
)

// Signal carries "the outbox changed" to a worker that otherwise sleeps until
// its next due time. It has one slot: a signal already waiting covers every
// later Kick, because the worker rescans what is due; so Kick never blocks,
// with or without a worker running.
type Signal struct{ c chan struct{} }

// NewSignal returns a Signal with nothing waiting.
func NewSignal() *Signal { return &Signal{c: make(chan struct{}, 1)} }

// Kick wakes the worker, now or at its next Wait.
func (s *Signal) Kick() {
	select {
	case s.c <- struct{}{}:
	default: // a wake-up is already waiting
	}
}

// Wait returns when ctx ends, when Kick is called (or was called since the
// last Wait), or when now() reaches until; a zero until waits for the other two.
func (s *Signal) Wait(ctx context.Context, until time.Time, now func() time.Time) {
	var due <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(max(until.Sub(now()), 0))
		defer t.Stop()
		due = t.C
	}
	select {
	case <-ctx.Done():
	case <-s.c:
	case <-due:
	}
}
