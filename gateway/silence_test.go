package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
)

// TestSilentPhoneDroppedTwoIntervalsAfterItWasLastHeard: the contract's
// bound (a device silent for 90 s, twice the ping interval, is offline).
// Phones answer their first ping and no other: each link is dropped once
// it has been silent for two ping intervals, not before (a ping's wait
// from its own sending, the pong timeout, dropped it as early as 1.2
// intervals after the last pong with a short timeout, and as late as 2.2
// with the default one), and not much after; the device's last seen, as
// the REST API shows it, is the pong, not the drop.
func TestSilentPhoneDroppedTwoIntervalsAfterItWasLastHeard(t *testing.T) {
	t.Parallel()
	const (
		interval = 500 * time.Millisecond
		phones   = 4
		// Slack for timers and goroutines late on a loaded machine (a race
		// build on two busy cores can be hundreds of milliseconds late):
		// the lower bound is the contract's point, the upper one only
		// catches a link kept far past it.
		slack = 2 * interval
	)
	r := newRig(t, Config{PingInterval: interval, PongTimeout: interval / 10})
	type silence struct {
		fp              string
		answered, ended time.Time
	}
	results := make(chan silence, phones)
	for i := range phones {
		fp := fmt.Sprintf("quiet-%d", i)
		var mu sync.Mutex
		var answered time.Time
		ws := r.connectHearingPings(r.pair(fp), func(context.Context, []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			if !answered.IsZero() {
				return false // silent from the first pong on
			}
			answered = time.Now() // before the pong is written: no later than the server hears it
			return true
		})
		go func() { // reads, so that pings are seen, until the server drops the link
			for {
				if _, _, err := ws.Read(context.Background()); err != nil {
					ended := time.Now()
					mu.Lock()
					defer mu.Unlock()
					results <- silence{fp, answered, ended}
					return
				}
			}
		}()
	}
	for range phones {
		var s silence
		select {
		case s = <-results:
		case <-time.After(10 * interval):
			t.Fatalf("a silent phone still linked after %v", 10*interval)
		}
		if s.answered.IsZero() {
			t.Fatalf("%s: dropped before it was pinged", s.fp)
		}
		silent := s.ended.Sub(s.answered)
		t.Logf("%s: dropped %v after its last pong", s.fp, silent)
		if silent < 2*interval || silent > 2*interval+slack {
			t.Errorf("%s: dropped %v after its last pong, want 2 ping intervals (%v)", s.fp, silent, 2*interval)
		}
		poll.Until(t, "offline", func() bool { return !r.hub.Online(s.fp, r.id(s.fp)) })
		// The pong, read after the phone answered, and well before the drop
		// (the hello's last seen is stored first, the link's at its end).
		var seen time.Time
		poll.Until(t, s.fp+": the pong stored as the last seen", func() bool {
			d, err := r.store.Device(s.fp)
			seen = d.LastSeenAt
			return err == nil && !seen.Before(s.answered.Add(-time.Millisecond))
		})
		if seen.After(s.ended.Add(-2 * interval)) {
			t.Errorf("%s: last seen %v, want the pong at %v (dropped %v)", s.fp, seen, s.answered, s.ended)
		}
	}
}
