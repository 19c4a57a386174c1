package cluster

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a node's clock on PostgreSQL: its own clock moved by its offset
// from the database server's, which the node reads at its start and at each
// beat (Measure). Every node of a cluster then times its work by one clock,
// the database's, as the leases, the registry and the rate windows already
// are.
//
// The nodes share what their clocks stamp: a send's time to live ends at
// the accepting node's time plus its TTL, and any node expires it; a
// scheduled send is released by whichever node finds it due by its own
// clock; a webhook's next attempt, a mail's, a token's or a pairing code's
// end is stamped by one node and read by the others. With each node on its
// own clock, one node a few minutes ahead (its NTP broken) released every
// company's scheduled sends those minutes early, expired queued sends
// early (sends answered 2xx that never reached their phone) and retried
// webhooks ahead of their schedule; one behind stamped its sends' ends
// early, and the other nodes expired them early.
type Clock struct {
	local func() time.Time
	log   *slog.Logger

	offset atomic.Int64 // added to local, in nanoseconds

	mu     sync.Mutex // guards the decision of Measure, never its reading
	warned bool       // the last offset set was logged as a WARN; guarded by mu
}

// Defaults, and why.
const (
	// ClockTolerance is how far a reading may be from the offset in use and
	// still count as the same: a reading's own error is half its round
	// trip, and below this the node keeps its own clock's pace rather than
	// stepping back and forth by milliseconds at each beat. An offset below
	// it is no offset: a node whose clock agrees with the database's runs on
	// its own, as before.
	ClockTolerance = 250 * time.Millisecond
	// clockMaxTrip is the longest round trip a reading may take to count:
	// a slower one (a database under load) says too little, and the next
	// beat reads again.
	clockMaxTrip = time.Second
	// clockWarn is the offset the node logs as a WARN: its own clock (or
	// the database server's) is wrong, and NTP wants fixing.
	clockWarn = time.Second
)

// NewClock is a clock on local (time.Now) with no offset until Measure.
func NewClock(local func() time.Time, log *slog.Logger) *Clock {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Clock{local: local, log: log}
}

// Now is the node's time: the database's, as last measured.
func (c *Clock) Now() time.Time { return c.local().Add(c.Offset()) }

// Offset is what the node adds to its own clock.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Measure reads the database's clock with read and sets the offset to it
// when the reading is more than ClockTolerance from the offset in use. A
// failed read (its error returned) or a slow one changes nothing.
func (c *Clock) Measure(read func() (time.Time, error)) error {
	before := c.local()
	db, err := read()
	if err != nil {
		return err
	}
	trip := c.local().Sub(before)
	if trip < 0 || trip > clockMaxTrip {
		return nil
	}
	off := db.Sub(before.Add(trip / 2))
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := off - c.Offset(); d > -ClockTolerance && d < ClockTolerance {
		return nil
	}
	if off > -ClockTolerance && off < ClockTolerance {
		off = 0
	}
	c.offset.Store(int64(off))
	switch far := off >= clockWarn || off <= -clockWarn; {
	case far:
		c.warned = true
		c.log.Warn("this node's clock differs from the database server's: the node times its work by the database's; fix NTP on whichever is wrong",
			"offset", off.Round(time.Millisecond).String())
	case c.warned:
		c.warned = false
		c.log.Info("this node's clock agrees with the database server's again", "offset", off.Round(time.Millisecond).String())
	}
	return nil
}
