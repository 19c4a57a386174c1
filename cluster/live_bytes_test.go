package cluster

import (
	"bytes"
	"log/slog"
	"testing"
)

// The events waiting for the bus are bounded in bytes as well as in
// number: large events (one company's long inbound messages, their
// characters written out in JSON escapes) while the bus's write waits are
// dropped past DefaultLiveQueueBytes, not held up to DefaultLiveQueue of
// them. Before, 64 events of 500 KiB were all held (31 MiB).
func TestLiveQueueIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	// No publisher runs: the bus's write waits for ever.
	l := &Live{log: slog.New(slog.DiscardHandler), queue: make(chan liveEvent, DefaultLiveQueue), maxBytes: DefaultLiveQueueBytes,
		stop: make(chan struct{}), done: make(chan struct{})}
	body := bytes.Repeat([]byte("x"), 500<<10)
	for range 64 {
		l.Offer(7, body)
	}
	held := int64(len(l.queue)) * int64(len(body))
	if held > DefaultLiveQueueBytes || l.queued.Load() != held {
		t.Fatalf("%d bytes of events wait (counted %d), want at most %d", held, l.queued.Load(), DefaultLiveQueueBytes)
	}
	if got, want := l.Dropped(), uint64(64-DefaultLiveQueueBytes/len(body)); got != want {
		t.Fatalf("%d events dropped, want %d", got, want)
	}
	// A small event still fits the room the large ones left.
	l.Offer(7, []byte(`{"id":1}`))
	if got := len(l.queue); got != DefaultLiveQueueBytes/len(body)+1 {
		t.Fatalf("%d events wait, want the small one queued too", got)
	}
}
