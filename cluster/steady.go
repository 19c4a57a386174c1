package cluster

import (
	"sync"
	"time"
)

// Beats records whether this node's own beats reach the database without a
// break, so that the node judges another node dead by its silence only when
// its own beats show the database was answering all along.
//
// The judgment is a node's beat older than the live window. When the
// database itself is gone for longer than the window (a restart, a
// failover, a network cut in front of it), every node's beat ages at once,
// and the first node to beat again would take all the others for dead: end
// their phone links in the registry (their devices then read offline on the
// other nodes, device.offline goes out after the grace, failover moves their
// queued jobs while their phones still send them) and give their webhook and
// mail leases to others (attempted twice). A node whose own beats ran
// unbroken through the whole window knows the database answered meanwhile:
// a node silent through it is dead (or cut off from the database, which is
// treated the same way on purpose).
type Beats struct {
	window time.Duration // the live window: how long the run must last
	gap    time.Duration // the longest time between two beats that is no break
	now    func() time.Time

	mu    sync.Mutex
	since time.Time // first beat of the current unbroken run; zero: none
	last  time.Time // the last beat written
}

// NewBeats records the beats of a node that beats every beatEvery and
// judges others by the live window. It starts with no run: a node that just
// started judges no other until its beats have run for a window.
func NewBeats(live, beatEvery time.Duration, now func() time.Time) *Beats {
	// Half the window: beats come every beatEvery (a fifth of the window),
	// so a gap this long is a database that did not answer several beats,
	// while a slow beat or two is no break. Another node's beat ages past
	// the window only through a gap nearly that long, which our own beats
	// then cross too.
	return &Beats{window: live, gap: max(live/2, 2*beatEvery), now: now}
}

// Beat records one beat: written (ok) or not.
func (b *Beats) Beat(ok bool) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !ok:
		b.since = time.Time{}
		return
	case b.since.IsZero() || now.Sub(b.last) > b.gap:
		b.since = now
	}
	b.last = now
}

// Steady says whether the node's beats have run unbroken for the whole
// live window up to its last beat, and that beat is recent: only then may
// it take another node's silence for its death.
func (b *Beats) Steady() bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.since.IsZero() && b.last.Sub(b.since) >= b.window && now.Sub(b.last) <= b.gap
}

// Current says whether the node's last beat was written within the longest
// gap that is no break: the other nodes read it live now, whether or not
// its run is long enough to judge them (Steady).
func (b *Beats) Current() bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.since.IsZero() && now.Sub(b.last) <= b.gap
}
