package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
)

// closing says whether Close began.
func (b *Bus) closingNow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closing
}

// Close returns only once the handlers of messages heard have returned: a
// handler under way when the node stops does not go on after it (the
// client's own Close does not wait for one). A message heard once Close
// began is not handed to its handler.
func TestCloseWaitsForTheHandlersUnderWay(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	a, b := nodeBus(t, url, "a"), nodeBus(t, url, "b")
	b.closeWait = time.Hour // the test's release ends the wait
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var finished, late atomic.Bool
	if err := b.Subscribe("held", func(m Message) {
		if string(m.Data) == "late" {
			late.Store(true)
			return
		}
		entered <- struct{}{}
		<-release
		finished.Store(true)
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Publish("held", []byte("first"))
	select {
	case <-entered:
	case <-time.After(poll.Timeout):
		t.Fatal("the handler never ran")
	}
	closed := make(chan bool, 1)
	go func() { b.Close(); closed <- finished.Load() }()
	underWay := func() {
		select {
		case <-closed:
			t.Fatal("Close returned while a handler was under way")
		default:
		}
	}
	poll.Until(t, "Close began", func() bool { underWay(); return b.closingNow() })
	a.Publish("late", []byte("late"))
	if err := a.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	underWay()
	close(release)
	select {
	case done := <-closed:
		if !done {
			t.Fatal("Close returned before the handler under way did")
		}
	case <-time.After(poll.Timeout):
		t.Fatal("Close did not return once the handler did")
	}
	if late.Load() {
		t.Error("a message heard once Close began was handed to its handler")
	}
}
