package client

import (
	"testing"
	"time"
)

// A link that hears something is given two ping intervals from then; one
// that hears nothing more is declared dead, never before that.
func TestSilenceCountsFromTheLastThingHeard(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	// The link hears something every half interval for a while, so the
	// first deadline passes unnoticed. A loaded machine can oversleep one
	// of those waits by two intervals, and the link is then rightly
	// declared dead in the middle: such a round proves nothing, and is run
	// again, ten times at most.
	for round := 1; ; round++ {
		s := NewSilence()
		dead := make(chan time.Time, 1)
		stop := s.Watch(interval, func() { dead <- time.Now() })
		var last time.Time
		kept := true // no gap between two hears as long as two intervals
		for i := range 5 {
			before := time.Now() // taken first: the hear is no earlier than this
			s.Hear()
			if i > 0 && time.Since(last) >= 2*interval {
				kept = false
			}
			last = before
			time.Sleep(interval / 2)
		}
		if !kept {
			stop()
			if round == 10 {
				t.Fatal("ten rounds of hears each had a gap of two intervals: the machine is too busy to tell")
			}
			continue
		}
		select {
		case at := <-dead:
			if quiet := at.Sub(last); quiet < 2*interval {
				t.Fatalf("declared dead %v after the last thing heard, want at least %v", quiet, 2*interval)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a silent link was never declared dead")
		}
		stop()
		return
	}
}
