package wakeup

import (
	"context"
	"testing"
	"time"
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
