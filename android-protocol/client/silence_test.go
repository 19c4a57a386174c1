package client

import (
	"testing"
	"time"
)

// A link that hears something is given two ping intervals from then; one
// that hears nothing more is declared dead, never before that.
func TestSilenceCountsFromTheLastThingHeard(t *testing.T) {
	t.Parallel()
	const interval = 20 * time.Millisecond
	s := NewSilence()
	dead := make(chan time.Time, 1)
	stop := s.Watch(interval, func() { dead <- time.Now() })
	defer stop()
	var last time.Time
	for range 5 { // heard for a while: the first deadline passes unnoticed
		last = time.Now() // taken first: the hear is no earlier than this
		s.Hear()
		time.Sleep(interval / 2)
	}
	select {
	case at := <-dead:
		if quiet := at.Sub(last); quiet < 2*interval {
			t.Fatalf("declared dead %v after the last thing heard, want at least %v", quiet, 2*interval)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent link was never declared dead")
	}
}
