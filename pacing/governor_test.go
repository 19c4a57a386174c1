package pacing

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/problem"
)

var govStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestGovernorMinuteCapAndRetryAfter(t *testing.T) {
	t.Parallel()
	clk := testclock.New(govStart.Add(300 * time.Millisecond))
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 8, PerHour: 200, PerDay: 1000}
	for i := range 8 {
		if r, retry := g.Reserve(Key{Number: 1}, caps, clk.Now(), nil); r == nil {
			t.Fatalf("send %d refused, retry %v", i+1, retry)
		}
		clk.Advance(time.Second)
	}
	// 8 sends at 10:00:00.3 .. 10:00:07.3; the first bucket (10:00:00 to
	// 10:00:01) frees a minute after its end, at 10:01:01.
	_, retry := g.Reserve(Key{Number: 1}, caps, clk.Now(), nil)
	if want := govStart.Add(time.Minute + time.Second).Sub(clk.Now()); retry != want {
		t.Fatalf("got retry %v, want %v", retry, want)
	}
	if got := problem.RetrySeconds(retry); got != 53 {
		t.Fatalf("got Retry-After %d, want 53", got)
	}
	clk.Advance(retry - time.Millisecond)
	if r, _ := g.Reserve(Key{Number: 1}, caps, clk.Now(), nil); r != nil {
		t.Fatal("a send before Retry-After passed")
	}
	clk.Advance(time.Millisecond)
	if r, _ := g.Reserve(Key{Number: 1}, caps, clk.Now(), nil); r == nil {
		t.Fatal("the send at Retry-After was refused")
	}
}

func TestGovernorWarmupHalves(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 8, PerHour: 200, PerDay: 1000}.Halved()
	if caps != (Caps{4, 100, 500}) {
		t.Fatalf("got %+v", caps)
	}
	for range 4 {
		if r, _ := g.Reserve(Key{Number: 7}, caps, govStart, nil); r == nil {
			t.Fatal("refused within the halved cap")
		}
	}
	if _, retry := g.Reserve(Key{Number: 7}, caps, govStart, nil); problem.RetrySeconds(retry) != 61 {
		t.Fatalf("fifth send: got retry %v, want 61 s (the bucket's end plus the minute)", retry)
	}
}

func TestGovernorReleaseAndHistory(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 2}
	r1, _ := g.Reserve(Key{Number: 3}, caps, govStart, nil)
	r2, _ := g.Reserve(Key{Number: 3}, caps, govStart, nil)
	if r1 == nil || r2 == nil {
		t.Fatal("refused")
	}
	if r, _ := g.Reserve(Key{Number: 3}, caps, govStart, nil); r != nil {
		t.Fatal("third send passed a cap of 2")
	}
	r2.Release()
	r2.Release() // a second release gives nothing more back
	if u := g.Usage(Key{Number: 3}, govStart, nil); u.Minute != 1 {
		t.Fatalf("after release: got %d in the minute, want 1", u.Minute)
	}
	// A fresh governor (a restart) rebuilds the windows from the history.
	g2 := NewGovernor(rand.NewPCG(1, 2))
	hist := func(since time.Time) []time.Time {
		if !since.Equal(govStart.Add(-24*time.Hour - 15*time.Minute)) {
			t.Errorf("history since %v", since)
		}
		return []time.Time{govStart.Add(-2 * time.Hour), govStart.Add(-30 * time.Second), govStart.Add(-10 * time.Second)}
	}
	if _, retry := g2.Reserve(Key{Number: 3}, caps, govStart, hist); problem.RetrySeconds(retry) != 31 {
		t.Fatalf("after rebuild: got retry %v, want 31 s", retry)
	}
	if u := g2.Usage(Key{Number: 3}, govStart, nil); u != (Usage{2, 2, 3}) {
		t.Fatalf("got usage %+v", u)
	}
}

// After a restart an agent may come back with queued jobs before anyone
// sends: the dispatch that comes first must not stand in for the history,
// or the number's windows would start empty.
func TestGovernorHistoryAfterADispatchFirst(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	if _, wait := g.Dispatch(Key{Number: 3}, Gap{}, govStart, time.Time{}); wait != 0 {
		t.Fatalf("first dispatch: wait %v", wait)
	}
	hist := func(time.Time) []time.Time {
		return []time.Time{govStart.Add(-20 * time.Second), govStart.Add(-10 * time.Second)}
	}
	if r, retry := g.Reserve(Key{Number: 3}, Caps{PerMinute: 2}, govStart, hist); r != nil || problem.RetrySeconds(retry) != 41 {
		t.Fatalf("two sends in the last minute with a cap of 2: got %v, retry %v; want refused for 41 s", r, retry)
	}
}

func TestGovernorDayWindow(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerDay: 3}
	at := govStart.Add(7 * time.Minute) // inside the 10:00-10:15 bucket
	for range 3 {
		g.Reserve(Key{Number: 9}, caps, at, nil)
	}
	_, retry := g.Reserve(Key{Number: 9}, caps, at.Add(time.Hour), nil)
	// The bucket 10:00-10:15 leaves the day at its end tomorrow, 10:15.
	if want := govStart.Add(24*time.Hour + 15*time.Minute).Sub(at.Add(time.Hour)); retry != want {
		t.Fatalf("got retry %v, want %v", retry, want)
	}
}

func TestGovernorGapJitter(t *testing.T) {
	t.Parallel()
	clk := testclock.New(govStart)
	g := NewGovernor(rand.NewPCG(42, 42))
	gap := Gap{Min: 2 * time.Second, Max: 5 * time.Second}
	var last time.Time
	seen := map[time.Duration]bool{}
	for i := 0; i < 20; {
		_, w := g.Dispatch(Key{Number: 5}, gap, clk.Now(), time.Time{})
		if w > 0 {
			clk.Advance(w)
			continue
		}
		if i > 0 {
			d := clk.Now().Sub(last)
			if d < gap.Min || d > gap.Max {
				t.Fatalf("gap %v outside [%v, %v]", d, gap.Min, gap.Max)
			}
			seen[d] = true
		}
		last = clk.Now()
		i++
	}
	if len(seen) < 10 {
		t.Fatalf("got %d distinct gaps in 19, want jitter", len(seen))
	}
}

// BenchmarkGovernorReserve is the decision of one send on a warm number.
func BenchmarkGovernorReserve(b *testing.B) {
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 1 << 15, PerHour: MaxCap, PerDay: MaxCap}
	now := govStart
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		if r, _ := g.Reserve(Key{Number: uint64(i % 1000)}, caps, now, nil); r != nil && i%2 == 0 {
			r.Release()
		}
	}
}

// BenchmarkGovernorRefuse is the decision of a send over its cap (the Retry-After path).
func BenchmarkGovernorRefuse(b *testing.B) {
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 8}
	for range 8 {
		g.Reserve(Key{Number: 1}, caps, govStart, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, _ := g.Reserve(Key{Number: 1}, caps, govStart, nil); r != nil {
			b.Fatal("passed")
		}
	}
}

// BenchmarkGovernorMemoryPerNumber reports the heap one number costs at 100,000 numbers.
func BenchmarkGovernorMemoryPerNumber(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g := NewGovernor(rand.NewPCG(1, 2))
		for k := range uint64(n) {
			g.Reserve(Key{Number: k}, Caps{PerMinute: 8}, govStart, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/number")
		runtime.KeepAlive(g)
	}
}

// After a restart the gap counts from the last job the number's agent took
// (the store keeps it): the first dispatch waits out at least gap.Min.
func TestGovernorGapSurvivesARestart(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	gap := Gap{Min: 2 * time.Second, Max: 5 * time.Second}
	if _, wait := g.Dispatch(Key{Number: 7}, gap, govStart, govStart.Add(-500*time.Millisecond)); wait != 1500*time.Millisecond {
		t.Fatalf("a job taken 0.5 s before the restart: wait %v, want 1.5 s", wait)
	}
	if _, wait := g.Dispatch(Key{Number: 7}, gap, govStart.Add(1500*time.Millisecond), govStart.Add(-500*time.Millisecond)); wait != 0 {
		t.Fatalf("after the wait: %v, want 0", wait)
	}
	if _, wait := g.Dispatch(Key{Number: 8}, gap, govStart, govStart.Add(-time.Hour)); wait != 0 {
		t.Fatalf("a number idle for an hour: wait %v, want 0", wait)
	}
}

// A number whose agent's link was on this node before, went to another
// node of a cluster, whose dispatch the agent took a moment ago, and came
// back: the next dispatch here waits the gap's minimum after that job, as
// the first one after a restart does. The state this node kept from an
// hour ago let it go at once, 0.1 s after the other node's.
func TestGovernorGapCountsAJobTakenSinceElsewhere(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	gap := Gap{Min: 2 * time.Second, Max: 5 * time.Second}
	if _, wait := g.Dispatch(Key{Number: 7}, gap, govStart, time.Time{}); wait != 0 {
		t.Fatalf("the first dispatch: wait %v, want 0", wait)
	}
	back := govStart.Add(time.Hour)
	taken := back.Add(-100 * time.Millisecond) // the other node's job
	if turn, wait := g.Dispatch(Key{Number: 7}, gap, back, taken); wait != 1900*time.Millisecond || turn != nil {
		t.Fatalf("back an hour later, a job taken elsewhere 0.1 s before: wait %v, want 1.9 s", wait)
	}
	at := taken.Add(gap.Min)
	if _, wait := g.Dispatch(Key{Number: 7}, gap, at, taken); wait != 0 {
		t.Fatalf("the gap's minimum after that job: wait %v, want 0", wait)
	}
	// A job taken by the agent of a node whose clock is an hour ahead of
	// this one's counts as taken now: the next waits a gap, not an hour more.
	ahead := back.Add(time.Hour)
	if _, wait := g.Dispatch(Key{Number: 8}, gap, back, ahead); wait != gap.Min {
		t.Fatalf("a job taken by a clock an hour ahead: wait %v, want %v", wait, gap.Min)
	}
	// Once: the same job does not hold the number back again at each look.
	if _, wait := g.Dispatch(Key{Number: 8}, gap, back.Add(gap.Min), ahead); wait != 0 {
		t.Fatalf("a gap after the job taken by a clock an hour ahead: wait %v, want 0", wait)
	}
	// This node's own job, taken (acked) within its gap, holds the next
	// one back by the gap drawn at its dispatch, no longer.
	_, drawn := g.Dispatch(Key{Number: 7}, gap, at, taken)
	if _, wait := g.Dispatch(Key{Number: 7}, gap, at.Add(time.Second), at.Add(time.Second)); wait != drawn-time.Second {
		t.Fatalf("acked a second after its dispatch: wait %v, want the %v drawn less that second", wait, drawn)
	}
}

// No span of a window's length holds more sends than its cap, wherever in
// their buckets the sends fell: sends late in a bucket still count a whole
// window after them, and Retry-After is never shorter than the exact wait.
func TestGovernorCapHoldsForAWholeWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		caps   Caps
		window time.Duration
		res    time.Duration
	}{
		{"minute", Caps{PerMinute: 8}, time.Minute, minuteRes},
		{"hour", Caps{PerHour: 200}, time.Hour, hourRes},
		{"day", Caps{PerDay: 1000}, 24 * time.Hour, dayRes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGovernor(rand.NewPCG(1, 2))
			limit := max(tc.caps.PerMinute, tc.caps.PerHour, tc.caps.PerDay)
			last := govStart.Add(tc.res - time.Millisecond) // at the very end of its bucket
			var sends []time.Time
			for range limit {
				if r, retry := g.Reserve(Key{Number: 1}, tc.caps, last, nil); r == nil {
					t.Fatalf("refused within the cap, retry %v", retry)
				}
				sends = append(sends, last)
			}
			history := func(since time.Time) []time.Time { return sends }
			// Every instant before the sends are a window old: the first
			// bucket after the sends' one, and just before the window ends.
			for _, at := range []time.Time{govStart.Add(tc.window), last.Add(tc.window - time.Millisecond)} {
				r, retry := g.Reserve(Key{Number: 1}, tc.caps, at, nil)
				if r != nil {
					t.Fatalf("a send at %v passed: %d sends within %v", at.Sub(last), limit+1, tc.window)
				}
				if exact := last.Add(tc.window).Sub(at); retry < exact {
					t.Fatalf("at %v: retry %v, shorter than the exact wait %v", at.Sub(last), retry, exact)
				}
				if got := Check(tc.caps, at, history); got != retry {
					t.Fatalf("at %v: Check waits %v, Reserve %v", at.Sub(last), got, retry)
				}
			}
			if r, retry := g.Reserve(Key{Number: 1}, tc.caps, govStart.Add(tc.res+tc.window), nil); r == nil {
				t.Fatalf("refused once the sends' bucket left the window, retry %v", retry)
			}
		})
	}
}

// A number's gap changed between two dispatches (PATCH gap_seconds) holds
// the next one by the gap in force, from the last dispatch: a pause drawn
// for the old gap neither parks the number after its gap was shortened nor
// lets it go early after it was lengthened.
func TestGovernorGapChangedBetweenDispatches(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	long, short := Gap{Min: time.Hour, Max: time.Hour}, Gap{Min: time.Second, Max: time.Second}
	if _, wait := g.Dispatch(Key{Number: 9}, long, govStart, time.Time{}); wait != 0 {
		t.Fatalf("first dispatch: wait %v, want 0", wait)
	}
	if _, wait := g.Dispatch(Key{Number: 9}, short, govStart.Add(2*time.Second), time.Time{}); wait != 0 {
		t.Fatalf("2 s after, the gap shortened to 1 s: wait %v, want 0", wait)
	}
	if _, wait := g.Dispatch(Key{Number: 9}, long, govStart.Add(3*time.Second), time.Time{}); wait != time.Hour-time.Second {
		t.Fatalf("1 s after, the gap lengthened to an hour: wait %v, want %v", wait, time.Hour-time.Second)
	}
	// Unchanged, the pause drawn stays: asking again draws nothing new.
	jitter := Gap{Min: 2 * time.Second, Max: 5 * time.Second}
	if _, wait := g.Dispatch(Key{Number: 10}, jitter, govStart, time.Time{}); wait != 0 {
		t.Fatalf("first dispatch of another number: wait %v, want 0", wait)
	}
	_, first := g.Dispatch(Key{Number: 10}, jitter, govStart, time.Time{})
	for range 20 {
		if _, wait := g.Dispatch(Key{Number: 10}, jitter, govStart, time.Time{}); wait != first {
			t.Fatalf("asked again with the same gap: wait %v, then %v", first, wait)
		}
	}
	// After a restart the pause from the last job taken is gap.Min; a gap
	// whose minimum is longer holds the first dispatch by it.
	g2 := NewGovernor(rand.NewPCG(1, 2))
	if _, wait := g2.Dispatch(Key{Number: 11}, Gap{Min: 2 * time.Second, Max: 2 * time.Second}, govStart, govStart.Add(-time.Second)); wait != time.Second {
		t.Fatalf("after a restart: wait %v, want 1 s", wait)
	}
	if _, wait := g2.Dispatch(Key{Number: 11}, Gap{Min: 10 * time.Second, Max: 10 * time.Second}, govStart, govStart.Add(-time.Second)); wait != 9*time.Second {
		t.Fatalf("after a restart, the gap lengthened: wait %v, want 9 s", wait)
	}
}

// TestGovernorReadsHistoryUnlocked: the history a number's first send
// reads is the store's (on PostgreSQL a query), so the governor reads it
// without holding its lock: every other number's sends and dispatches
// went on waiting for that round trip, and for as long as the database
// took to answer.
func TestGovernorReadsHistoryUnlocked(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	other := make(chan struct{})
	hist := func(time.Time) []time.Time {
		go func() {
			defer close(other)
			g.Dispatch(Key{Number: 2}, Gap{}, govStart, time.Time{}) // another number's dispatch
			g.Reserve(Key{Number: 3}, Caps{PerMinute: 8}, govStart, nil)
		}()
		select {
		case <-other:
		case <-time.After(10 * time.Second):
			t.Error("another number's dispatch and send waited for this number's history")
		}
		return nil
	}
	if r, _ := g.Reserve(Key{Number: 1}, Caps{PerMinute: 8}, govStart, hist); r == nil {
		t.Fatal("the first send: refused")
	}
	<-other
}

// TestGovernorHistoryReadAgainAfterARefusal: a send that read the
// number's history and was then not stored (the store failed, reading
// that history among others, or refused it) gives its slot back and
// leaves the history to be read again: the windows it built stayed the
// number's for good, and with a history the store failed to give, empty,
// the number could send its caps' worth again whatever it had sent.
func TestGovernorHistoryReadAgainAfterARefusal(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 2}
	failed := func(time.Time) []time.Time { return nil } // what a store that failed to read it gives
	r, _ := g.Reserve(Key{Number: 5}, caps, govStart, failed)
	if r == nil {
		t.Fatal("the first send: refused")
	}
	r.Release() // its transaction failed
	hist := func(time.Time) []time.Time {
		return []time.Time{govStart.Add(-20 * time.Second), govStart.Add(-10 * time.Second)}
	}
	if r, retry := g.Reserve(Key{Number: 5}, caps, govStart, hist); r != nil || problem.RetrySeconds(retry) != 41 {
		t.Fatalf("two sends in the last minute with a cap of 2: got %v, retry %v; want refused for 41 s", r, retry)
	}
	// A reservation that did not read the history gives back its slot alone.
	one := func(time.Time) []time.Time { return []time.Time{govStart.Add(-20 * time.Second)} }
	if r, _ := g.Reserve(Key{Number: 6}, Caps{PerMinute: 3}, govStart, one); r == nil {
		t.Fatal("the first send: refused")
	}
	r, _ = g.Reserve(Key{Number: 6}, Caps{PerMinute: 3}, govStart, one)
	if r == nil {
		t.Fatal("the second send: refused")
	}
	r.Release()
	if u := g.Usage(Key{Number: 6}, govStart, nil); u.Minute != 2 {
		t.Fatalf("usage after the second send's release: got %d, want 2 (the history's and the first send)", u.Minute)
	}
}

// TestGovernorReleaseAfterTheHistoryWasReadAgain: two sends of a number
// run again in one batch (the embedded store's group commit retrying it
// without a failing member): the first, which read the history, gives
// back its windows and reads it again; the second, giving back its slot
// next, has none left in the windows read again, and took the first's.
func TestGovernorReleaseAfterTheHistoryWasReadAgain(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 8}
	hist := func(time.Time) []time.Time { return []time.Time{govStart.Add(-20 * time.Second)} }
	r1, _ := g.Reserve(Key{Number: 4}, caps, govStart, hist)
	r2, _ := g.Reserve(Key{Number: 4}, caps, govStart, hist)
	// The batch runs again: each send gives back its slot and takes one.
	r1.Release()
	if r, _ := g.Reserve(Key{Number: 4}, caps, govStart, hist); r == nil {
		t.Fatal("the first send again: refused")
	}
	r2.Release()
	if r, _ := g.Reserve(Key{Number: 4}, caps, govStart, hist); r == nil {
		t.Fatal("the second send again: refused")
	}
	if u := g.Usage(Key{Number: 4}, govStart, hist); u.Minute != 3 {
		t.Fatalf("usage: got %d, want 3 (the history's send and the two)", u.Minute)
	}
}

// A dispatch whose job did not go after all (the store refused its
// hand-out: another agent took the job, or the number was paused or moved
// since its read) gives its gap back: the number's next job goes as soon
// as the gap of the dispatch before it allows, not one gap later. Given
// back after another dispatch was allowed, it changes nothing: no two jobs
// that went are ever closer than one gap.
func TestGovernorGapGivenBack(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	gap := Gap{Min: 10 * time.Second, Max: 10 * time.Second}
	first, wait := g.Dispatch(Key{Number: 1}, gap, govStart, time.Time{})
	if first == nil || wait != 0 {
		t.Fatalf("first dispatch: turn %v, wait %v", first, wait)
	}
	// 4 s after the first job went, one refused: given back, the next
	// job waits the first one's gap only, 6 s more.
	refused, wait := g.Dispatch(Key{Number: 1}, gap, govStart.Add(4*time.Second), time.Time{})
	if wait != 6*time.Second || refused != nil {
		t.Fatalf("within the first gap: turn %v, wait %v, want 6 s", refused, wait)
	}
	refused, _ = g.Dispatch(Key{Number: 1}, gap, govStart.Add(10*time.Second), time.Time{})
	if refused == nil {
		t.Fatal("after the first gap: no turn")
	}
	refused.GiveBack()
	refused.GiveBack() // only the first call counts
	if _, wait := g.Dispatch(Key{Number: 1}, gap, govStart.Add(11*time.Second), time.Time{}); wait != 0 {
		t.Fatalf("after a turn given back: wait %v, want 0 (the refused job started no gap)", wait)
	}
	// The dispatch at 11 s went: a turn of before it given back late
	// does not undo its gap.
	late, _ := g.Dispatch(Key{Number: 2}, gap, govStart, time.Time{})
	if _, wait := g.Dispatch(Key{Number: 2}, gap, govStart.Add(10*time.Second), time.Time{}); wait != 0 {
		t.Fatalf("number 2, one gap later: wait %v, want 0", wait)
	}
	late.GiveBack()
	if _, wait := g.Dispatch(Key{Number: 2}, gap, govStart.Add(11*time.Second), time.Time{}); wait != 9*time.Second {
		t.Fatalf("a turn given back after a later one went: wait %v, want 9 s (the later one's gap stands)", wait)
	}
	// The first dispatch of a process given back counts from the last job
	// the store says was taken again.
	g2 := NewGovernor(rand.NewPCG(1, 2))
	taken := govStart.Add(-time.Hour)
	turn, _ := g2.Dispatch(Key{Number: 3}, gap, govStart, taken)
	turn.GiveBack()
	if _, wait := g2.Dispatch(Key{Number: 3}, gap, govStart.Add(time.Second), taken); wait != 0 {
		t.Fatalf("the first dispatch given back, the last job taken an hour ago: wait %v, want 0", wait)
	}
	var none *Turn
	none.GiveBack() // safe on a nil turn
}

// Waits tells how long the pause drawn at the number's last dispatch still
// holds the next one, deciding nothing and making no state: 0 for a number
// it does not know, or whose pause is over.
func TestGovernorWaits(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	k := Key{Company: 1, Number: 1}
	if w := g.Waits(k, govStart); w != 0 || g.Len() != 0 {
		t.Fatalf("an unknown number: wait %v and %d states, want 0 and none", w, g.Len())
	}
	gap := Gap{Min: 3 * time.Second, Max: 3 * time.Second}
	g.Dispatch(k, gap, govStart, time.Time{})
	if w := g.Waits(k, govStart.Add(time.Second)); w != 2*time.Second {
		t.Fatalf("a second after the dispatch: wait %v, want 2 s", w)
	}
	if _, w := g.Dispatch(k, gap, govStart.Add(time.Second), time.Time{}); w != 2*time.Second {
		t.Fatalf("Dispatch's own wait %v, want the same 2 s", w)
	}
	if w := g.Waits(k, govStart.Add(3*time.Second)); w != 0 {
		t.Fatalf("the gap over: wait %v, want 0", w)
	}
}
