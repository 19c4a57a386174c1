package agent

import (
	"testing"
	"time"
)

// plan books sends of the given parts one after another, each going out
// the moment it may (as the executor does, one at a time), and returns
// when each went.
func plan(p *Pacer, parts []int) []time.Time {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var at []time.Time
	for _, n := range parts {
		t, _ := p.book(now, n)
		at = append(at, t)
		now = t
	}
	return at
}

// A message's parts go at once, and Android counts them in its rolling
// minute: the pacer keeps every minute within its parts, long messages
// included. Spaced only evenly, a message of 24 parts and the next 57.6 s
// later put 48 parts in one minute, past Android's 30.
func TestPacerKeepsEveryMinuteWithinItsParts(t *testing.T) {
	t.Parallel()
	for _, parts := range [][]int{
		{24, 24, 24, 24},
		{10, 10, 10, 10, 10, 10},
		{1, 24, 1, 1, 24, 6, 6, 6, 6, 6},
		{30, 1, 30}, // over the minute's 25: each alone in its minute
	} {
		at := plan(NewPacer(25), parts)
		for i := range at {
			used := 0
			for j := 0; j <= i; j++ {
				if at[j].After(at[i].Add(-time.Minute)) {
					used += parts[j]
				}
			}
			if used > 25 && used != parts[i] {
				t.Errorf("parts %v: %d parts in the minute up to send %d (%s)", parts, used, i, at[i].Format("15:04:05.0"))
			}
		}
	}
}

// Single parts keep the even spacing: one every 2.4 s at 25 a minute.
func TestPacerSpacesSinglePartsEvenly(t *testing.T) {
	t.Parallel()
	parts := make([]int, 60)
	for i := range parts {
		parts[i] = 1
	}
	at := plan(NewPacer(25), parts)
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap != 2400*time.Millisecond {
			t.Fatalf("send %d came %s after the one before, want 2.4s", i, gap)
		}
	}
}

// A send is counted from its end (done): one that took long moves the
// minute it counts in, and the sends after it wait for that minute.
func TestPacerCountsASendFromItsEnd(t *testing.T) {
	t.Parallel()
	p := NewPacer(25)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	first, m := p.book(now, 20)
	m.at = first.Add(5 * time.Second) // the tool took 5 s
	next, _ := p.book(m.at, 20)
	if want := first.Add(65 * time.Second); next.Before(want) {
		t.Fatalf("the next send may go at %s, want a minute after the first ended (%s)", next.Format("15:04:05"), want.Format("15:04:05"))
	}
}
