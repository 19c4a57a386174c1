package pacing

import (
	"math/rand/v2"
	"sync"
	"time"
)

// The anti-ban governor: per WhatsApp number or iMessage handle, rolling caps
// on accepted sends per minute, hour and day (halved during a warm-up), and a
// random gap between dispatches. docs/pacing.md gives the reasoning behind
// each default.
//
// Each number's state is a fixed-size structure of bucketed counters, so
// memory per number is the same whether it sent once or a thousand times:
//
//	minute: 61 buckets of 1 s    hour: 61 buckets of 1 min    day: 97 buckets of 15 min
//
// A window counts the buckets that overlap it: the current bucket and the
// whole window before it, so one bucket more than the window holds. A send
// counts in a window until its bucket has left it whole: a bucket frees its
// slots at its end plus the window, never earlier, so no span of the
// window's length ever holds more sends than the cap, wherever in their
// buckets the sends fell. That makes Retry-After exact to the bucket's
// resolution, rounded up (a client that waits that long is not refused by
// the same window again), never shorter than the exact wait, and never 0.

// Defaults of the governor (contract section 10, "Pacing defaults").
const (
	DefaultWhatsAppPerMinute = 8
	DefaultWhatsAppPerHour   = 200
	DefaultWhatsAppPerDay    = 1000
	DefaultWhatsAppGapMin    = 2 * time.Second
	DefaultWhatsAppGapMax    = 5 * time.Second
	DefaultIMessagePerMinute = 10
	DefaultIMessagePerHour   = 300
	DefaultIMessagePerDay    = 2000
	DefaultIMessageGapMin    = 1 * time.Second
	DefaultIMessageGapMax    = 3 * time.Second
	// DefaultWarmup is how long a new number's caps stay halved.
	DefaultWarmup = 7 * 24 * time.Hour
	// MaxCap bounds a cap: a bucket counts in 16 bits.
	MaxCap = 65535
)

// Caps are the rolling caps of one number; 0 means no cap in that window.
type Caps struct {
	PerMinute, PerHour, PerDay int
}

// Halved is the warm-up's caps: half of each, at least 1.
func (c Caps) Halved() Caps {
	h := func(v int) int {
		if v <= 0 {
			return v
		}
		return max(v/2, 1)
	}
	return Caps{h(c.PerMinute), h(c.PerHour), h(c.PerDay)}
}

// Gap is the range of the random pause between two dispatches of one number.
type Gap struct {
	Min, Max time.Duration
}

// Window geometry: bucket count and resolution. Each ring holds its
// window's buckets and the one the window's start falls in: a send in that
// bucket may be less than the window old.
const (
	minuteBuckets, minuteRes = 61, time.Second
	hourBuckets, hourRes     = 61, time.Minute
	dayBuckets, dayRes       = 97, 15 * time.Minute
)

// ring is one window's buckets; last is the absolute index (time / res) of
// the newest bucket written or cleared, sum the count over the window.
type ring struct {
	last int64
	sum  uint32
}

// numberState is one number's windows and gap. Fixed size: 536 bytes on
// 64-bit machines (576 allocated, the allocator's size class).
type numberState struct {
	min               [minuteBuckets]uint16
	hour              [hourBuckets]uint16
	day               [dayBuckets]uint16
	rMin, rHour, rDay ring
	// next is when the next dispatch may go, last when the pause before it
	// began (the last dispatch, or the last job taken before a restart),
	// both in unix nanoseconds: next-last is the pause drawn.
	next, last int64
	// taken is the last job taken (the store's lastTaken) that the pause
	// was counted from, so that it holds the number back once.
	taken int64
	// sent is the time of the newest send the windows counted (unix
	// nanoseconds): a day window and a bucket after it, every window is
	// empty (Sweep tells so without advancing them).
	sent int64
	// turns counts the dispatches allowed: a Turn given back undoes its
	// gap only while it is the last one (GiveBack).
	turns uint64
	// loaded says the windows hold the number's history: a state that
	// Dispatch made first (an agent's queue drained after a restart, before
	// any send) has not read it yet.
	loaded bool
	// reads counts the times the windows were emptied for the history to
	// be read again (unload): a reservation taken before holds no slot in
	// the windows read since.
	reads uint32
}

// advance clears the buckets that left the window by cur.
func advance(b []uint16, r *ring, cur int64) {
	n := int64(len(b))
	if cur <= r.last {
		return
	}
	if cur-r.last >= n {
		clear(b)
		r.sum = 0
	} else {
		for i := r.last + 1; i <= cur; i++ {
			j := i % n
			r.sum -= uint32(b[j])
			b[j] = 0
		}
	}
	r.last = cur
}

// wait is how long until the window holds fewer than limit sends, given
// that it holds r.sum now; 0 when it already does.
func wait(b []uint16, r *ring, res time.Duration, limit int, now time.Time) time.Duration {
	if limit <= 0 || int(r.sum) < limit {
		return 0
	}
	n := int64(len(b))
	over := int(r.sum) - limit + 1 // sends that must leave the window
	for i := r.last - n + 1; i <= r.last; i++ {
		over -= int(b[((i%n)+n)%n])
		if over <= 0 {
			// Bucket i leaves the window at the start of bucket i+n:
			// its own end plus the window's length.
			free := time.Unix(0, 0).Add(time.Duration(i+n) * res)
			return free.Sub(now)
		}
	}
	return time.Duration(n) * res
}

func bucketOf(t time.Time, res time.Duration) int64 { return t.UnixNano() / int64(res) }

func (s *numberState) advanceAll(now time.Time) {
	advance(s.min[:], &s.rMin, bucketOf(now, minuteRes))
	advance(s.hour[:], &s.rHour, bucketOf(now, hourRes))
	advance(s.day[:], &s.rDay, bucketOf(now, dayRes))
}

// add counts a send at t (which must not be ahead of the rings' last
// bucket by more than advanceAll allows); negative d takes one back.
func (s *numberState) add(t time.Time, d int) {
	for _, w := range []struct {
		b   []uint16
		r   *ring
		res time.Duration
	}{{s.min[:], &s.rMin, minuteRes}, {s.hour[:], &s.rHour, hourRes}, {s.day[:], &s.rDay, dayRes}} {
		i := bucketOf(t, w.res)
		n := int64(len(w.b))
		if i > w.r.last || i <= w.r.last-n {
			continue // outside the window: nothing to count or give back
		}
		j := i % n
		if d < 0 && w.b[j] == 0 {
			continue
		}
		w.b[j] = uint16(int(w.b[j]) + d)
		w.r.sum = uint32(int(w.r.sum) + d)
	}
	if d > 0 {
		s.sent = max(s.sent, t.UnixNano())
	}
}

// addHistory counts the sends history lists. One stamped after now (by a
// node whose clock is ahead of this one's, or before this clock was set
// back) counts as made now: left out, as it was, a node behind another
// let a number send past its caps, each send the other had just made
// being in its future.
func (s *numberState) addHistory(past []time.Time, now time.Time) {
	for _, t := range past {
		s.add(minTime(t, now), 1)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}

// Key names a number to the governor: its store id, and the company whose
// number it is, so that a company's numbers can be forgotten together
// (ForgetCompany).
type Key struct {
	Company, Number uint64
}

// Governor holds the state of every number it has seen, until the number
// idles past what its state remembers (Sweep) or its company is removed
// (ForgetCompany). Safe for concurrent use.
type Governor struct {
	mu     sync.Mutex
	states map[Key]*numberState // guarded by mu
	// companies counts the states of each company's numbers (Companies);
	// guarded by mu.
	companies map[uint64]int
	rnd       *rand.Rand // guarded by mu
}

// NewGovernor returns a governor; src is its random source for the gap's
// jitter (injected, so tests can replay it).
func NewGovernor(src rand.Source) *Governor {
	return &Governor{states: map[Key]*numberState{}, companies: map[uint64]int{}, rnd: rand.New(src)}
}

// Len is the number of numbers whose state the governor holds; it is meant
// for metrics and tests.
func (g *Governor) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.states)
}

// ForgetCompany drops the state of every number of the company, once its
// removal ended: its numbers are gone from the store, and no send or
// dispatch of theirs comes again. It returns how many it dropped.
func (g *Governor) ForgetCompany(company uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.companies[company] == 0 {
		return 0
	}
	before := len(g.states)
	for k := range g.states {
		if k.Company == company {
			delete(g.states, k)
		}
	}
	delete(g.companies, company)
	g.shrink(before)
	return before - len(g.states)
}

// Companies lists the companies of the numbers whose state the governor
// holds, each once, in no particular order: the server asks its store which
// of them were removed (channel.Service), once a minute, so that a company
// removed by another node or an admin command is forgotten (ForgetCompany)
// on every node.
func (g *Governor) Companies() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]uint64, 0, len(g.companies))
	for c := range g.companies {
		out = append(out, c)
	}
	return out
}

// add keeps a new state of key; mu held.
func (g *Governor) add(key Key, s *numberState) {
	g.states[key] = s
	g.companies[key.Company]++
}

// Sweep drops the state of every number that carries nothing at now: a
// state made afresh would decide every send and dispatch of the number as
// it would. That is when
//
//   - its windows are empty: no send it counts is less than its window
//     old (a day and a quarter of an hour, for a number that sent), so
//     the caps would count nothing; the history a fresh state reads at
//     its first send holds nothing of them either; and
//   - its next dispatch, and the last job taken it knows of, are idle or
//     more before now, idle being at least the longest gap a number may
//     have: a fresh state waits only the gap's minimum after the last job
//     taken (Dispatch's lastTaken), which by then has passed.
//
// A state whose windows never read the number's history (made by a
// dispatch, or emptied for the history to be read again) counts only its
// gap: its first send reads the history as a fresh state's would. A
// Reservation or Turn of a state dropped gives nothing back to the state
// made after it. Sweep returns how many it dropped; the owner calls it
// periodically (the limiters start no goroutines).
func (g *Governor) Sweep(now time.Time, idle time.Duration) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	before := len(g.states)
	for k, s := range g.states {
		if s.idle(now, idle) {
			delete(g.states, k)
			if g.companies[k.Company]--; g.companies[k.Company] <= 0 {
				delete(g.companies, k.Company)
			}
		}
	}
	g.shrink(before)
	return before - len(g.states)
}

// idle says whether the state carries nothing at now (Sweep).
func (s *numberState) idle(now time.Time, idle time.Duration) bool {
	at := now.UnixNano()
	if at-max(s.next, s.taken) < int64(idle) {
		return false
	}
	// A send counts in a window until its bucket has left it whole: the
	// day's, the longest, a day and a bucket after the send at most.
	return !s.loaded || at-s.sent >= int64(dayBuckets*dayRes)
}

// shrink moves the states to a fresh map when most of the before there
// were went: Go maps never give back their buckets, and a map that held a
// burst of numbers would keep its size after they were dropped. mu held.
func (g *Governor) shrink(before int) {
	if n := len(g.states); n < before/2 {
		fresh := make(map[Key]*numberState, n)
		for k, s := range g.states {
			fresh[k] = s
		}
		g.states = fresh
	}
}

// History lists a number's accepted sends at or after since (a day and one
// day bucket before now), oldest first or in any order: the governor
// rebuilds its windows from it the first time it sees the number (after a
// restart, say), and again after a send that read it was released. It is
// called without the governor's lock held, so it may read a database.
type History func(since time.Time) []time.Time

// Reservation is a slot a send took; Release gives it back when the send is
// not stored after all.
type Reservation struct {
	g   *Governor
	key Key
	// s is the state the slot was taken in: a state dropped since (Sweep)
	// and made again holds no slot of it.
	s  *numberState
	at time.Time
	// loaded says the reservation's Reserve read the number's history;
	// reads is the state's reads then.
	loaded bool
	reads  uint32
}

// Release gives the slot back. It is safe on a nil reservation, and only
// the first call has an effect. A reservation whose Reserve read the
// number's history leaves it to be read again, by the next Reserve: the
// send's transaction, in which it was read, did not commit, and may have
// failed for that very read (a History cannot say it failed, and gives
// what it has, nothing).
func (r *Reservation) Release() {
	if r == nil || r.g == nil {
		return
	}
	r.g.mu.Lock()
	if s := r.s; r.g.states[r.key] == s {
		switch {
		case r.reads != s.reads:
			// The windows were read again since: its slot is not in them
			// (a send stored meanwhile is in the history read).
		case r.loaded:
			s.unload()
		default:
			s.advanceAll(r.at)
			s.add(r.at, -1)
		}
	}
	r.g.mu.Unlock()
	r.g = nil
}

// unload empties the windows for the history to be read again; the gap
// between dispatches stays.
func (s *numberState) unload() {
	clear(s.min[:])
	clear(s.hour[:])
	clear(s.day[:])
	s.rMin, s.rHour, s.rDay, s.loaded = ring{}, ring{}, ring{}, false
	s.reads++
}

// past reads the history a state of key needs, if it has not read it
// yet: before g.mu is taken, since a History reads the store (on
// PostgreSQL, a query), and every number's sends and dispatches would
// wait for it. Sends of one number are serialised by the store (its
// single writer, or the number's row lock), so no other reads it
// meanwhile; if one did, state counts only the first.
func (g *Governor) past(key Key, now time.Time, history History) (past []time.Time, read bool) {
	if history == nil {
		return nil, false
	}
	g.mu.Lock()
	s := g.states[key]
	loaded := s != nil && s.loaded
	g.mu.Unlock()
	if loaded {
		return nil, false
	}
	return history(now.Add(-dayBuckets * dayRes)), true
}

// state is key's state at now, its windows loaded with past (what past
// read) if they were not; mu held. It reports whether it loaded them.
func (g *Governor) state(key Key, now time.Time, past []time.Time) (*numberState, bool) {
	s := g.states[key]
	if s == nil {
		s = &numberState{}
		g.add(key, s)
	}
	s.advanceAll(now)
	if s.loaded {
		return s, false
	}
	s.addHistory(past, now)
	s.loaded = true
	return s, true
}

// Reserve takes a slot for one send of the number at now, or says how long
// until one frees (retry > 0, no slot taken). Call it where the send is
// stored, under the store's single writer, so two sends never both take the
// last slot; release the reservation if the store then refuses the send.
func (g *Governor) Reserve(key Key, caps Caps, now time.Time, history History) (res *Reservation, retry time.Duration) {
	past, read := g.past(key, now, history)
	g.mu.Lock()
	defer g.mu.Unlock()
	s, loaded := g.state(key, now, past)
	loaded = loaded && read
	retry = max(
		wait(s.min[:], &s.rMin, minuteRes, caps.PerMinute, now),
		wait(s.hour[:], &s.rHour, hourRes, caps.PerHour, now),
		wait(s.day[:], &s.rDay, dayRes, caps.PerDay, now),
	)
	if retry > 0 {
		return nil, retry
	}
	s.add(now, 1)
	return &Reservation{g: g, key: key, s: s, at: now, loaded: loaded, reads: s.reads}, 0
}

// Turn is a dispatch that Dispatch allowed; GiveBack gives its gap back
// when the job did not go to the agent after all.
type Turn struct {
	g   *Governor
	key Key
	s   *numberState // the state it was counted in (Reservation.s)
	// turn is the state's turns once this one was counted; last and next
	// are the state's before it.
	turn       uint64
	last, next int64
}

// GiveBack undoes the turn's gap: the number's next dispatch is held back
// by the gap before it again, counted from the dispatch before it, so no
// two jobs that went are ever closer than one gap. It does nothing once
// another dispatch of the number was allowed since (that one's gap
// stands), and only the first call has an effect; it is safe on a nil
// turn.
func (t *Turn) GiveBack() {
	if t == nil || t.g == nil {
		return
	}
	t.g.mu.Lock()
	if s := t.s; t.g.states[t.key] == s && s.turns == t.turn {
		s.last, s.next = t.last, t.next
		s.turns--
	}
	t.g.mu.Unlock()
	t.g = nil
}

// Dispatch decides whether the number may hand a job to its agent at now:
// wait 0 means yes (turn is the dispatch), and the next dispatch is then
// held back by a random gap in [gap.Min, gap.Max]; otherwise wait is how
// long until it may (turn nil). lastTaken
// is when the number's agent last took a job as the store remembers it: a
// dispatch keeps at least gap.Min after it when it is later than the next
// dispatch this process had allowed, or the process knows of none (the
// first after a restart, say; a job another node of a cluster dispatched
// while the number's link was there). A pause drawn for another gap than
// gap (the number's was changed since) is drawn again from gap, from the
// same start, so a shorter gap lets the next job go sooner and a longer
// one holds it longer.
func (g *Governor) Dispatch(key Key, gap Gap, now, lastTaken time.Time) (turn *Turn, wait time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.states[key]
	if s == nil {
		s = &numberState{}
		s.advanceAll(now)
		g.add(key, s)
	}
	if lt := lastTaken.UnixNano(); !lastTaken.IsZero() && lt > s.next && lt > s.taken {
		// Taken after the pause this process knows of had ended (or with
		// none known, after a start): by the agent of another node the
		// number's link was on meanwhile, or by this one's agent acking
		// late. The next dispatch waits the gap's minimum after it, once
		// for each such job. A time ahead of the clock (another node's
		// clock ahead of this one's) counts as now, as a send's does
		// (addHistory): the number waits a gap, not the clocks' difference
		// too.
		s.taken = lt
		at := minTime(lastTaken, now)
		s.last = at.UnixNano()
		s.next = at.Add(max(gap.Min, 0)).UnixNano()
	}
	if lo := max(gap.Min, 0); s.next != 0 {
		if p := time.Duration(s.next - s.last); p < lo || p > max(gap.Max, lo) {
			s.next = s.last + int64(g.gap(gap))
		}
	}
	if d := time.Duration(s.next - now.UnixNano()); d > 0 {
		return nil, d
	}
	turn = &Turn{g: g, key: key, s: s, last: s.last, next: s.next}
	s.last = now.UnixNano()
	s.next = now.Add(g.gap(gap)).UnixNano()
	s.turns++
	turn.turn = s.turns
	return turn, 0
}

// Waits is how long the number's next dispatch is held back by the pause
// this governor drew (0: none, or none known), without a dispatch decided
// or anything read: a caller that knows the number's job waits for its
// gap need not read the job or the number again before then. The pause is
// the one drawn for the number's gap at its last Dispatch; a gap changed
// since may shorten it, which only Dispatch, given the new gap, sees.
func (g *Governor) Waits(key Key, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.states[key]; s != nil {
		return max(time.Duration(s.next-now.UnixNano()), 0)
	}
	return 0
}

// gap draws one pause; mu held.
func (g *Governor) gap(gap Gap) time.Duration {
	if gap.Max <= gap.Min {
		return max(gap.Min, 0)
	}
	return gap.Min + time.Duration(g.rnd.Int64N(int64(gap.Max-gap.Min)+1))
}
