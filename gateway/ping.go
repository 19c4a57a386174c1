package gateway

import (
	"math/rand/v2"
	"sync"
	"time"
)

// pingSlots is the size of the pingers' ring. A tick is a 32nd of the ping
// interval, so the longest wait, the interval plus its jitter (1.2 times),
// spans 39 slots.
const (
	pingSlots        = 64
	pingTicksPerWait = 32
)

// pinger sends the pings of every link of a hub from one timer: a ring of
// slots a tick apart, each a list of the links whose next ping falls in it.
// A link costs two pointers in its own record, where a timer of its own
// costs a runtime timer and its closure; the timer runs only while links
// wait for a ping.
type pinger struct {
	tick time.Duration

	mu    sync.Mutex
	slots [pingSlots]*conn // heads of lists linked through conn.pingNext; guarded by mu
	pos   int              // the slot the next tick serves; guarded by mu
	n     int              // links in the ring; guarded by mu
	timer *time.Timer      // armed while n > 0; guarded by mu
}

func newPinger(interval time.Duration) *pinger {
	return &pinger{tick: max(interval/pingTicksPerWait, time.Millisecond)}
}

// after has c pinged in about d (within a tick), once; the ping is the
// link's own pingOnce. A link that is closed is not kept.
func (p *pinger) after(c *conn, d time.Duration) {
	ahead := min(max(int(d/p.tick), 1), pingSlots-1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.pingSlot != 0 || c.closed() {
		return
	}
	i := (p.pos + ahead - 1) % pingSlots
	c.pingSlot = i + 1
	c.pingPrev, c.pingNext = nil, p.slots[i]
	if c.pingNext != nil {
		c.pingNext.pingPrev = c
	}
	p.slots[i] = c
	p.n++
	switch {
	case p.timer == nil:
		p.timer = time.AfterFunc(p.tick, p.serve)
	case p.n == 1: // the first link since the ring emptied
		p.timer.Reset(p.tick)
	}
}

// forget takes c out of the ring; the timer stops with the last link.
func (p *pinger) forget(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unlink(c)
	if p.n == 0 && p.timer != nil {
		p.timer.Stop()
	}
}

// unlink takes c out of its slot's list, if it is in one; mu held.
func (p *pinger) unlink(c *conn) {
	if c.pingSlot == 0 {
		return
	}
	if c.pingPrev != nil {
		c.pingPrev.pingNext = c.pingNext
	} else {
		p.slots[c.pingSlot-1] = c.pingNext
	}
	if c.pingNext != nil {
		c.pingNext.pingPrev = c.pingPrev
	}
	c.pingSlot, c.pingPrev, c.pingNext = 0, nil, nil
	p.n--
}

// serve is a tick: it pings the links of the current slot, each on a
// goroutine of its own that lasts for the round trip, as a timer of the
// link's own would, and moves on to the next slot.
func (p *pinger) serve() {
	var due []*conn
	p.mu.Lock()
	for c := p.slots[p.pos]; c != nil; c = p.slots[p.pos] {
		p.unlink(c)
		due = append(due, c)
	}
	p.pos = (p.pos + 1) % pingSlots
	if p.n > 0 {
		p.timer.Reset(p.tick)
	}
	p.mu.Unlock()
	for _, c := range due {
		c.spawn(taskPing, c.pingOnce) // refused: the link is over
	}
}

// jitter spreads pings of links made at the same moment (a server restart)
// over ±20% of the interval.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(d/5)*2+1))
}
