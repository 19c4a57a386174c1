package wakeup

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testclock"
)

// waitReturns runs Wait and wants it back within a deadline.
func waitReturns(t *testing.T, what string, w *Signal, ctx context.Context, until time.Time) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.Wait(ctx, until, time.Now); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Wait did not return", what)
	}
}

func TestSignal(t *testing.T) {
	t.Parallel()
	w := NewSignal()
	// Kicks before a Wait are kept, as one.
	w.Kick()
	w.Kick()
	waitReturns(t, "after two kicks", w, context.Background(), time.Time{})

	// A due time in the past returns at once; a Kick while waiting returns too.
	waitReturns(t, "past due", w, context.Background(), time.Now().Add(-time.Second))
	go w.Kick()
	waitReturns(t, "kicked while waiting", w, context.Background(), time.Now().Add(time.Hour))

	// The second kick of the first pair was absorbed: with nothing waiting, only the context ends it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waitReturns(t, "context ended", w, ctx, time.Time{})
	select {
	case <-w.c:
		t.Fatal("a stale wake-up was left waiting")
	default:
	}
}

// Wait returns once now() reaches until, however it gets there: a clock
// set forward (NTP stepping the wall clock, a test's clock) or a machine
// that slept, whose timers count only the time it was awake. Its timer was
// armed for until's distance when it began, so a scheduled send due in
// the morning went out the hours the machine slept late (its clock read
// the due time long before).
func TestWaitReadsTheClockAgain(t *testing.T) {
	t.Parallel()
	w := &Signal{c: make(chan struct{}, 1), recheck: 10 * time.Millisecond}
	clock := testclock.New(time.Date(2026, 3, 29, 0, 59, 0, 0, time.UTC))
	until := clock.Now().Add(time.Hour)
	// The clock moves once Wait has read it and armed its sleep on it.
	read := make(chan struct{})
	var once sync.Once
	now := func() time.Time {
		t := clock.Now()
		once.Do(func() { close(read) })
		return t
	}
	done := make(chan struct{})
	go func() { w.Wait(context.Background(), until, now); close(done) }()
	<-read
	clock.Advance(time.Hour)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return once its clock read the due time")
	}
	if NewSignal().recheck != Recheck {
		t.Fatalf("a new Signal reads the clock again every %v, want %v", NewSignal().recheck, Recheck)
	}
}
