package web

import (
	"testing"

	"github.com/simrelay/simrelay/store"
)

func TestBrokerDropsASlowTabWithoutBlocking(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{Buffer: 2}, nil)
	slow, err := b.subscribe(1, 1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := b.subscribe(1, 2, "s2")
	other, _ := b.subscribe(2, 3, "s3")
	for i := range 3 {
		b.MessageChanged(store.Message{ID: uint64(i + 1), CompanyID: 1})
		<-fast.events // the fast tab keeps up
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("a tab 3 events behind with a buffer of 2 was not dropped")
	}
	// The dropped tab gets no more events, but its slot is its handler's
	// to give back.
	b.MessageChanged(store.Message{ID: 9, CompanyID: 1})
	if got := len(slow.events); got != 2 {
		t.Errorf("events queued for the dropped tab: got %d, want 2", got)
	}
	if got := b.Streams(); got != 3 {
		t.Errorf("streams before the dropped handler returns: got %d, want 3", got)
	}
	b.release(slow)
	b.release(slow) // a second release gives back nothing more
	if got := b.Streams(); got != 2 {
		t.Errorf("streams after the dropped handler returned: got %d, want 2", got)
	}
	if len(other.events) != 0 {
		t.Errorf("company 2's tab got %d events of company 1", len(other.events))
	}
	b.Close()
	if _, err := b.subscribe(1, 1, "s4"); err == nil {
		t.Error("a closed broker took a new stream")
	}
}

// TestBrokerRendersOnlyForOpenTabs: a change of a company with no tab
// open costs no rendering (every send and report passes here); one with a
// tab open reaches it.
func TestBrokerRendersOnlyForOpenTabs(t *testing.T) {
	b := NewBroker(StreamConfig{Buffer: 4}, nil)
	m := store.Message{ID: 1, CompanyID: 1, UUID: "u", Phone: "+15551234567", Text: "hello", Direction: store.Outbound, Status: store.MsgQueued}
	if n := testing.AllocsPerRun(100, func() { b.MessageChanged(m) }); n != 0 {
		t.Errorf("a change nobody watches allocated %.0f times, want 0", n)
	}
	s, err := b.subscribe(1, 1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	b.MessageChanged(m)
	if got := len(s.events); got != 1 {
		t.Fatalf("events for the open tab: got %d, want 1", got)
	}
}
