package web

import (
	"testing"

	"github.com/simrelay/simrelay/store"
)

func TestBrokerDropsASlowTabWithoutBlocking(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{Buffer: 2})
	slow, err := b.subscribe(1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := b.subscribe(1, "s2")
	other, _ := b.subscribe(2, "s3")
	for i := range 3 {
		b.MessageChanged(store.Message{ID: uint64(i + 1), CompanyID: 1})
		<-fast.events // the fast tab keeps up
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("a tab 3 events behind with a buffer of 2 was not dropped")
	}
	if got := b.Streams(); got != 2 {
		t.Errorf("streams after the drop: got %d, want 2", got)
	}
	if len(other.events) != 0 {
		t.Errorf("company 2's tab got %d events of company 1", len(other.events))
	}
	b.Close()
	if _, err := b.subscribe(1, "s4"); err == nil {
		t.Error("a closed broker took a new stream")
	}
}
