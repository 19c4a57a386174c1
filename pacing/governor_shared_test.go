package pacing

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Check answers what Reserve answers for a governor that never saw the
// number, with the same history: caps and waits alike.
func TestCheckAnswersAsANewGovernor(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	caps := Caps{PerMinute: 4, PerHour: 20, PerDay: 50}
	for round := range 200 {
		var sends []time.Time
		for range rnd.IntN(60) {
			sends = append(sends, start.Add(-time.Duration(rnd.Int64N(int64(25*time.Hour)))))
		}
		history := func(since time.Time) []time.Time {
			var out []time.Time
			for _, s := range sends {
				if !s.Before(since) {
					out = append(out, s)
				}
			}
			return out
		}
		_, want := NewGovernor(rand.NewPCG(1, 2)).Reserve(Key{Number: 1}, caps, start, history)
		if got := Check(caps, start, history); got != want {
			t.Fatalf("round %d with %d sends: Check waits %v, a new governor %v", round, len(sends), got, want)
		}
	}
}

// Sends another node stamped by a clock ahead of this one's (or stamped
// before this clock was set back) count, as made now: they are the number's
// sends all the same. Left out, a node behind let a number past its cap.
func TestCheckCountsSendsStampedAheadOfTheClock(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	caps := Caps{PerMinute: 2}
	ahead := []time.Time{now.Add(300 * time.Millisecond), now.Add(2 * time.Second)}
	history := func(time.Time) []time.Time { return ahead }
	// Counted in now's bucket, they leave the minute 61 s from now.
	want := now.Add(61 * time.Second).Sub(now)
	if got := Check(caps, now, history); got != want {
		t.Fatalf("two sends stamped ahead of the clock, cap 2: Check waits %v, want %v", got, want)
	}
	if _, got := NewGovernor(rand.NewPCG(1, 2)).Reserve(Key{Number: 1}, caps, now, history); got != want {
		t.Fatalf("two sends stamped ahead of the clock, cap 2: Reserve after a start waits %v, want %v", got, want)
	}
}
