package gateway

// The link's window of sends: the pump that writes waiting jobs while it has
// room, their pace, and the places acks free.

import (
	"context"
	"time"
)

// pump writes waiting jobs to the link while the window of un-acked sends
// has room: SMS first, then the jobs of its WhatsApp numbers and iMessage
// handles, each paced by its gap (agents.go).
func (c *conn) pump() {
	c.pumpMu.Lock()
	defer c.pumpMu.Unlock()
	c.pumpHeld()
}

// pumpHeld is pump with pumpMu held.
func (c *conn) pumpHeld() {
	c.takePace()
	c.owed = false // this pump fills whatever is free
	c.pumpSMS()
	c.pumpAgents()
}

// pumpSMS writes waiting SMS jobs; pumpMu held.
func (c *conn) pumpSMS() {
	// unsent is how many priority jobs not to be sent (failed or held in
	// the store's next commit, which this does not wait for) a read of
	// this pump found: they hold no place in the queue's order, so they
	// come back at the head of every read until that commit lands. Each
	// read takes that many more, and only a read that finds more of them
	// than the last counts them as progress: the pump reads past them
	// once, not again and again for as long as the commit takes.
	unsent := 0
	for {
		room := c.hub.cfg.MaxInflight - len(c.inflight)
		if room <= 0 || c.closed() {
			return
		}
		// Priority jobs come back at every read until acked, so read as
		// many more as the link holds, and as those not to be sent.
		limit := room + len(c.priority) + unsent
		if c.gated("load pending jobs") {
			return
		}
		jobs, err := c.hub.intake.Pending(context.Background(), c.dev, c.cursor, limit)
		if err != nil {
			// The link ends, as at every other store fault of a link: with
			// 1013 while the database is out of reach, which brings the
			// phone back within 1 to 15 s of its return (PROTOCOL.md
			// section 14), and the next link's hello reads the queue from
			// its start. Left up, the link would pump again only at the
			// next send or ack, and jobs queued before an outage would
			// wait on a live link after the database came back. A timer
			// per link retrying the read would have 10,000 links each ask
			// a database that is gone, where their upgrades are answered
			// from memory but for one a second (outage.go). Closing takes
			// no lock of the pump's.
			c.storeFault(err, "load pending jobs", "device", c.dev.Fingerprint)
			return
		}
		c.hub.reached()
		progress, found := false, 0
		for _, j := range jobs {
			if j.Send == nil { // expired (the sweeper marks it), held or failed: not sent, and out of the queue's way
				if j.Seq != 0 {
					c.cursor = j.Seq
					progress = true
				} else {
					found++
				}
				continue
			}
			if _, held := c.inflight[j.Send.ID]; held {
				continue // a priority job this link has (Seq 0: read again each time)
			}
			if len(c.inflight) >= c.hub.cfg.MaxInflight {
				return // the window is full: the next ack pumps again
			}
			if c.pace != nil {
				r := c.pace.Reserve()
				if d := r.Delay(); d > 0 {
					r.Cancel()
					if c.paceTimer == nil {
						var timer *time.Timer
						timer = time.AfterFunc(d, func() {
							c.pumpMu.Lock()
							if c.paceTimer == timer { // not one armed since, after this one stopped
								c.paceTimer = nil
							}
							c.pumpMu.Unlock()
							c.timerPump()
						})
						c.paceTimer = timer
					}
					return
				}
			}
			if !c.hub.noteDispatch(c, j.Seq) {
				// A failover holds the device, and c is not the link it
				// holds: the job may move. The hold pumps c again as it
				// ends. (A pace reserved above is spent: the next send
				// waits one more interval, in a rare case.)
				return
			}
			if !c.send(j.Send) { // the pointer: the frame as a value would be a copy on the heap
				return
			}
			c.take(j.Send.ID)
			if j.Seq != 0 {
				c.cursor = j.Seq
			} else {
				if c.priority == nil {
					c.priority = map[string]struct{}{}
				}
				c.priority[j.Send.ID] = struct{}{}
			}
			progress = true
		}
		if found > unsent {
			unsent, progress = found, true
		}
		// A short batch was the end of the queue. A full one may have been
		// expired jobs only, which filled no slot: read on, or the jobs
		// behind them would wait for the next send or link. One that moved
		// nothing (priority jobs this link has, or those not to be sent it
		// read before) would read the same again: their acks, and the next
		// send, pump again.
		c.queueEnd = len(jobs) < limit
		if c.queueEnd || !progress {
			return
		}
	}
}

// timerPump is the pump a pace's or a gap's timer starts when a send it
// held back is due: on one of the link's goroutines (spawn), counted in
// the hub's wait group as a kick's pump is, so Shutdown waits for it (and
// names it among those still running at its deadline). The timer's own
// goroutine is no link's: a pump run on it could still be under way when
// Shutdown returned. None starts once every goroutine of the link ended
// while the hub stops (spawn): the link is over, and a pump after its end
// sends nothing.
func (c *conn) timerPump() {
	if c.closed() {
		return
	}
	c.spawn(taskPump, c.pump)
}

// kick tells the link that jobs were just queued for it (release: a
// release, Hub.Release), and returns at once: the link's own pump
// goroutine (pumpKicks) pumps for it. The caller, a send's request among
// them, never waits for the pump: not for its read of the queue, nor for a
// failover moving the device's jobs (HoldDevice), which holds the
// registered link's pump until the move commits. A kick is never lost:
// one that comes while that goroutine pumps has it pump again, and its
// read of the queue starts after the kick, so it finds every job made
// durable before it.
func (c *conn) kick(release bool) {
	if c.closed() {
		return // a link closing writes no job; the next link reads the queue from its start
	}
	c.kmu.Lock()
	c.kicked = true
	c.released = c.released || release
	start := !c.kicking
	c.kicking = true
	c.kmu.Unlock()
	if start && !c.spawn(taskPump, c.pumpKicks) {
		// Every goroutine of the link ended and the hub is stopping
		// (spawn): the link is over, and nothing is left to pump.
		c.kmu.Lock()
		c.kicking = false
		c.kmu.Unlock()
	}
}

// pumpKicks is the link's pump goroutine: it pumps for the kicks that
// came (kick) until none is left. The kicks that come while it waits for
// the pump's lock are taken by one pump. A release also reads again the
// agent jobs the link passed over (rewind); a kick for a new job does
// not: none of those became the link's, and reading them again, with
// every job of the link in flight after them, made each kick's reads grow
// with the link's jobs in flight.
func (c *conn) pumpKicks() {
	for {
		c.pumpMu.Lock()
		c.kmu.Lock()
		if !c.kicked {
			c.kicking = false // a kick from now starts the goroutine again
			c.kmu.Unlock()
			c.pumpMu.Unlock()
			return
		}
		release := c.released
		c.kicked, c.released = false, false
		c.kmu.Unlock()
		c.queueEnd = false // the queue has jobs past its end again
		if release {
			c.rewind()
		}
		c.pumpHeld()
		c.pumpMu.Unlock()
	}
}

// repump is a release pumped on the caller's goroutine, which waits for
// the pump (Hub.Repump).
func (c *conn) repump() {
	c.pumpMu.Lock()
	defer c.pumpMu.Unlock()
	c.queueEnd = false
	c.rewind()
	c.pumpHeld()
}

// take puts a send written to the link in the window; pumpMu held.
func (c *conn) take(id string) {
	if c.inflight == nil {
		c.inflight = map[string]struct{}{}
	}
	c.inflight[id] = struct{}{}
}

// settle frees a send's place in the window; it reports whether the send
// was in the window. The answerer refills the places freed (refill).
func (c *conn) settle(id string) bool {
	c.pumpMu.Lock()
	_, was := c.inflight[id]
	delete(c.inflight, id)
	if len(c.inflight) == 0 {
		c.inflight = nil // an idle link holds no map
	}
	if c.priority != nil {
		delete(c.priority, id)
		if len(c.priority) == 0 {
			c.priority = nil
		}
	}
	c.owed = c.owed || was
	c.pumpMu.Unlock()
	return was
}

// refill writes jobs into the places of the window freed since the last
// pump, once half the window is free or no other answer waits (idle): a
// phone whose acks come in a stream has its window refilled in one read of
// the queue per half window instead of one read per ack, and still never
// holds fewer than half the window's jobs while it has a backlog. Answerer
// goroutine only.
func (c *conn) refill(idle bool) {
	c.pumpMu.Lock()
	// Once a read found the queue's end, only a kick (a new job) can
	// bring SMS jobs; WhatsApp and iMessage jobs are read on every refill.
	more := !c.queueEnd || len(c.lines) > 0
	due := c.owed && more && (idle || len(c.inflight) <= c.hub.cfg.MaxInflight/2)
	if due {
		c.owed = false
	}
	c.pumpMu.Unlock()
	if due {
		c.pump()
	}
}
