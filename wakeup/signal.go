// Package wakeup holds what the durable outboxes (mail, webhook deliveries)
// share: the wake-up of the one worker that drains each of them.
package wakeup

import (
	"context"
	"time"
)

// Recheck is the longest Wait sleeps without reading its clock again. A
// timer counts the time the machine is awake (Go's monotonic clock), not
// the clock's: one armed for a due time hours ahead fires late by as long
// as the machine slept meanwhile (a suspended laptop or virtual machine),
// or by as far as the wall clock was set forward. Reading the clock every
// minute bounds that lateness to a minute, for one clock read a minute
// (the worker is not woken: Wait sleeps on while until is ahead).
const Recheck = time.Minute

// Signal carries "the outbox changed" to a worker that otherwise sleeps until
// its next due time. It has one slot: a signal already waiting covers every
// later Kick, because the worker rescans what is due; so Kick never blocks,
// with or without a worker running.
type Signal struct {
	c       chan struct{}
	recheck time.Duration // Recheck; tests shorten it
}

// NewSignal returns a Signal with nothing waiting.
func NewSignal() *Signal { return &Signal{c: make(chan struct{}, 1), recheck: Recheck} }

// Kick wakes the worker, now or at its next Wait.
func (s *Signal) Kick() {
	select {
	case s.c <- struct{}{}:
	default: // a wake-up is already waiting
	}
}

// Wait returns when ctx ends, when Kick is called (or was called since the
// last Wait), or when now() reaches until, which it reads at least every
// Recheck; a zero until waits for the other two.
func (s *Signal) Wait(ctx context.Context, until time.Time, now func() time.Time) {
	for {
		var due <-chan time.Time
		var t *time.Timer
		if !until.IsZero() {
			d := until.Sub(now())
			if d <= 0 {
				return
			}
			t = time.NewTimer(min(d, s.recheck))
			due = t.C
		}
		select {
		case <-ctx.Done():
		case <-s.c:
		case <-due:
			continue // the clock is read again: until may be reached, or not yet
		}
		if t != nil {
			t.Stop()
		}
		return
	}
}
