package gateway

// The link's liveness: a ping's round trip and the pong that ends it, and
// whether a phone that sent no pong was heard from anyway.

import (
	"context"
	"sync"
	"time"
)

// A link is dropped once its phone has been silent for two ping intervals
// (the contract's 90 s at the default 45 s): a ping waits for its pong
// until then, counted from quietSince, and for at least the pong timeout,
// however late it was sent. The silence is counted while the reader
// reads: its wait for the store on a frame it took does not count (the
// clock starts again as it reads again), and a missing pong with the
// reader not reading at some time of the wait asks again (heard).

// monoStart is the origin of mono.
var monoStart = time.Now()

// mono is the monotonic clock's nanoseconds since monoStart: times the
// pings compare, on the real clock whatever the hub's.
func mono() int64 { return int64(time.Since(monoStart)) }

// quiet records that the phone was heard, or that the reader reads again
// after a frame it took: the silence the pings bound starts now.
func (c *conn) quiet() { c.quietSince.Store(mono()) }

// pongWait is how long a ping sent now waits for its pong: until the
// phone has been silent for two ping intervals, and at least the pong
// timeout.
func (c *conn) pongWait() time.Duration {
	left := time.Duration(c.quietSince.Load() + int64(2*c.hub.cfg.PingInterval) - mono())
	return max(left, c.hub.cfg.PongTimeout)
}

// silentFor is why a link whose ping went unanswered is dropped.
func (c *conn) silentFor() string {
	return "no pong: silent for " + time.Duration(mono()-c.quietSince.Load()).Round(time.Millisecond).String()
}

// pingWait is a ping of the link's own (linkIO.ping) waiting for its pong,
// which the link's reader takes between frames.
type pingWait struct {
	done chan struct{} // closed by the pong, or by the link's end
	once sync.Once
}

func (w *pingWait) end() { w.once.Do(func() { close(w.done) }) }

// ponged is a pong the reader took before the library saw it.
func (c *conn) ponged() {
	c.touch()
	if w := c.ping.Load(); w != nil {
		w.end()
	}
}

// pingOnce sends one ping and ends the link if no pong comes back in time;
// it runs on a goroutine of its own, which exists only for the round trip,
// and has the hub's pinger send the next.
func (c *conn) pingOnce() {
	if c.closed() {
		return
	}
	if l, ok := c.sock.(*linkIO); ok && l.onPong != nil {
		if sent, ok := c.pingOwn(l); sent || !ok {
			if ok {
				c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
			}
			return
		}
		if !l.unsynced.Load() {
			// A frame was being written: ping at the next tick, not an
			// interval later, which would let the silence run past its
			// bound.
			c.hub.pings.after(c, c.hub.pings.tick)
			return
		}
	}
	since := c.mark()
	ctx, cancel := context.WithTimeout(context.Background(), c.pongWait())
	defer cancel()
	if err := c.ws.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			if c.heard(since) && !c.closed() {
				c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
				return
			}
			c.lost(c.silentFor())
		}
		c.end()
		return
	}
	c.touch()
	c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
}

// pingOwn pings through the link's connection and waits for the pong the
// reader takes (or the link's end): sent is false when no ping could be
// written between frames, ok false when the link ended or its phone did not
// answer in time (pongWait).
func (c *conn) pingOwn(l *linkIO) (sent, ok bool) {
	since := c.mark() // before the waiter is seen: a test waits for it to change the reader's state
	w := &pingWait{done: make(chan struct{})}
	c.ping.Store(w)
	defer c.ping.Store(nil)
	if c.closed() {
		return false, false
	}
	wait := time.Now().Add(c.pongWait())
	sent, err := l.ping(c.hub.cfg.PongTimeout)
	if err != nil {
		c.end()
		return false, false
	}
	if !sent {
		return false, true
	}
	t := time.NewTimer(time.Until(wait))
	defer t.Stop()
	select {
	case <-w.done:
		return true, !c.closed()
	case <-t.C:
		if c.heard(since) {
			return true, !c.closed() // the next ping asks again
		}
		c.lost(c.silentFor())
		c.end()
		return true, false
	}
}

// readMark is where the link's reader stood when a ping was sent: the
// frames it had read, and whether it was taking one (not reading).
type readMark struct {
	frames uint32
	busy   bool
}

// mark is where the reader stands now.
func (c *conn) mark() readMark {
	return readMark{frames: c.frames.Load(), busy: c.handling.Load()}
}

// heard says whether the phone proved itself alive since the reader stood
// at since: a frame came in since, or the reader was not reading at some
// time of the wait, then or now (it waited for the store to take a report,
// and a pong it would take waited behind), so a missing pong is the
// server's delay, not a silent phone's. A reader that ends its wait for the
// store just before the pong timeout has not yet read the pong behind the
// report; the next ping asks again, with the whole timeout.
func (c *conn) heard(since readMark) bool {
	return c.frames.Load() != since.frames || since.busy || c.handling.Load()
}
