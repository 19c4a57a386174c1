package cluster

import (
	"bytes"
	"log/slog"
	"sync/atomic"
	"testing"
)

// The signals waiting for the bus's sender are bounded in bytes as well
// as in number: large ones (live events of one company's long inbound
// messages, their characters written out in JSON escapes) while the
// sender waits are dropped past queueBytes, not held up to queueSize of
// them, and each is counted where its publisher counts its drops.
func TestPublishQueueIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	// No sender runs: the client's write waits for ever.
	b := &Bus{prefix: "p", log: slog.New(slog.DiscardHandler), out: make(chan outgoing, queueSize),
		stop: make(chan struct{}), sent: make(chan struct{})}
	var tally atomic.Uint64
	body := bytes.Repeat([]byte("x"), 500<<10)
	for range 64 {
		b.publish("live.7", body, &tally)
	}
	held := int64(len(b.out)) * int64(len(body))
	if held > queueBytes || b.queued.Load() != held {
		t.Fatalf("%d bytes of signals wait (counted %d), want at most %d", held, b.queued.Load(), queueBytes)
	}
	if got, want := tally.Load(), uint64(64-queueBytes/len(body)); got != want {
		t.Fatalf("%d signals dropped, want %d", got, want)
	}
	// A small signal still fits the room the large ones left.
	b.publish("live.7", []byte(`{"id":1}`), &tally)
	if got := len(b.out); got != queueBytes/len(body)+1 {
		t.Fatalf("%d signals wait, want the small one queued too", got)
	}
}
