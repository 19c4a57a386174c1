package gateway

import (
	"slices"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Which link is each device's: registration, its undoing, and what the
// rest of the server asks of it.

// replacedReason is the reason of a 4009: the close of a link a newer link
// of its device displaced.
const replacedReason = "replaced by a newer connection"

// register makes c the device's link, returning the link it replaces.
func (h *Hub) register(c *conn) (old *conn, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for hold := h.holds[c.dev.ID]; hold != nil; hold = h.holds[c.dev.ID] {
		// A failover is moving the device's queued jobs: the new link
		// reads its queue once they are gone.
		h.mu.Unlock()
		<-hold.done
		h.mu.Lock()
	}
	if h.draining || c.closed() {
		return nil, false
	}
	old = h.conns[c.dev.Fingerprint]
	h.conns[c.dev.Fingerprint] = c
	return old, true
}

// unregister drops c unless a newer link took its place already; the
// presence hook hears of it only then.
func (h *Hub) unregister(c *conn) {
	now := h.now()
	ended := c.closedSince() // offline since then, not since its handshake ended
	if ended.IsZero() {
		ended = now
	}
	h.mu.Lock()
	was := h.conns[c.dev.Fingerprint] == c
	if was {
		delete(h.conns, c.dev.Fingerprint)
		h.endedAt[c.dev.ID] = ended
	}
	h.forgetOld(now)
	h.mu.Unlock()
	if was {
		c.ended()
	}
	if was && h.presence != nil {
		h.presence.Down(c.dev)
	}
}

// noteDispatch records that the job at queue place seq of c's device is
// about to be written to c. It refuses (false: c writes no job now) while
// a failover holds the device and c is not the link the hold holds: a
// link the device's registered one displaced, open until that one's
// second look ends (or given its place back by it). The hold pumps c
// again as it ends.
func (h *Hub) noteDispatch(c *conn, seq uint64) bool {
	now := h.now()
	id := c.dev.ID
	h.mu.Lock()
	defer h.mu.Unlock()
	if hold := h.holds[id]; hold != nil && hold.link != c {
		if !slices.Contains(hold.refused, c) {
			hold.refused = append(hold.refused, c)
		}
		return false
	}
	h.dispatched[id] = dispatchMark{upTo: max(seq, h.dispatched[id].upTo), at: now}
	return true
}

// deviceHold is a failover's hold on a device (HoldDevice): done is
// closed as it ends; link is the device's registered link when it began
// (nil: none), whose pumps wait on its pumpMu; refused are the device's
// other links whose pump found the device held (noteDispatch), pumped
// again as it ends. Guarded by hub.mu.
type deviceHold struct {
	done    chan struct{}
	link    *conn
	refused []*conn
}

// OfflineSince is when the device's last link ended since the hub
// started; zero when it is online or had no link since. It is of the
// device (its id), not of the fingerprint: a device paired again under the
// fingerprint after a delete is another, whose offline time starts with
// its own links, not with the end of the old device's.
func (h *Hub) OfflineSince(fingerprint string, deviceID uint64) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.conns[fingerprint]; c != nil && c.dev.ID == deviceID {
		if !c.closed() {
			return time.Time{}
		}
		return c.closedSince() // closing: the handshake holds its place a while
	}
	return h.endedAt[deviceID]
}

// HoldDevice runs fn while no link of the device can write a job: the
// registered link's pump waits, any other open link of the device (one
// the registered link displaced, open until that one's second look ends)
// writes no job and pumps again once fn returned (noteDispatch), and a
// new link's registration waits until fn returns. fn gets the highest
// queue place written to any of the device's links since the hub started
// (jobs above it were never handed to a phone by this process) and
// whether a link is live. The hold is of the device (its id): the
// fingerprint's link here of another device (one deleted whose link is
// not closed yet, or one paired again under the fingerprint after a
// delete) is neither held nor counted as live, and a registration of that
// other device does not wait.
func (h *Hub) HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error {
	h.mu.Lock()
	for hold := h.holds[deviceID]; hold != nil; hold = h.holds[deviceID] {
		h.mu.Unlock()
		<-hold.done
		h.mu.Lock()
	}
	c := h.conns[fingerprint]
	if c != nil && c.dev.ID != deviceID {
		c = nil
	}
	hold := &deviceHold{done: make(chan struct{}), link: c}
	h.holds[deviceID] = hold
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.holds, deviceID)
		refused := hold.refused
		h.mu.Unlock()
		close(hold.done)
		for _, l := range refused {
			l.pump() // jobs it found held and did not write; a link closed since writes none
		}
	}()
	if c != nil {
		c.pumpMu.Lock()
		defer c.pumpMu.Unlock()
	}
	h.mu.Lock()
	upTo := h.dispatched[deviceID].upTo
	h.mu.Unlock()
	return fn(upTo, c != nil)
}

// giveBack undoes the registration of c, refused (why) right after it
// displaced old: old, if still open, gets its place back and the jobs
// queued meanwhile, unless the refusal closes it too (refusal.spares): it
// is closed as c was, from its place back. It is closed under the lock
// that gives the place back: a kick (a send) that finds it there finds it
// closed, and writes no job to it. When a newer link of the device took
// the place from c meanwhile, old has no place to get back: it is closed
// 4009, as that newer link's success would have closed it had old still
// held the place (that link displaced c, so it closes c only). A
// Disconnect that found c in the place closes old as it closed c, even
// when the refusal alone would spare it.
func (h *Hub) giveBack(c, old *conn, why *refusal) {
	var stored chan struct{}
	shut := false
	code, reason := why.code, why.reason
	h.mu.Lock()
	held := h.conns[c.dev.Fingerprint]
	back := held == c && old != nil && !old.closed()
	switch {
	case back:
		h.conns[c.dev.Fingerprint] = old
		switch {
		case !why.spares(c, old):
			stored, shut = old.beginClose()
		case c.told != nil:
			// A Disconnect found c in the place: the device changed
			// after old's look too (a registration again after the one
			// c's look read, say).
			stored, shut = old.beginClose()
			code, reason = c.told.code, c.told.reason
		}
	case held == c:
		delete(h.conns, c.dev.Fingerprint)
	case old != nil && held != old && !old.closed():
		stored, shut = old.beginClose()
		code, reason = proto.CloseReplaced, replacedReason
	}
	h.mu.Unlock()
	switch {
	case shut:
		old.closeBegun(code, reason, nil, stored)
	case back && !old.closed():
		old.pump()
	}
}

func (h *Hub) lookup(fingerprint string) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[fingerprint]
}

// lookupOf is the device's registered link: the fingerprint's, when it is
// of the device (its id). Every per-device question and order goes by it:
// a device deleted whose link is not closed yet and the device paired
// again under its fingerprint are two devices, and what is asked of or
// told to one is not the other's.
func (h *Hub) lookupOf(fingerprint string, deviceID uint64) *conn {
	if c := h.lookup(fingerprint); c != nil && c.dev.ID == deviceID {
		return c
	}
	return nil
}

// live is the fingerprint's link while it is open: one the server is
// closing stays registered until its close handshake ends, which can take
// seconds with a phone that does not read, but the device is offline from
// the moment the server decided to close it.
func (h *Hub) live(fingerprint string) *conn {
	if c := h.lookup(fingerprint); c != nil && !c.closed() {
		return c
	}
	return nil
}

// liveOf is live of the device's link only (lookupOf).
func (h *Hub) liveOf(fingerprint string, deviceID uint64) *conn {
	if c := h.live(fingerprint); c != nil && c.dev.ID == deviceID {
		return c
	}
	return nil
}

// closedSince is when c stopped being open; zero while it is open.
func (c *conn) closedSince() time.Time {
	if at := c.closedAt.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// Online reports whether the device (fingerprint and id) has a live link.
func (h *Hub) Online(fingerprint string, deviceID uint64) bool {
	return h.liveOf(fingerprint, deviceID) != nil
}

// LastSeen is when the device's live link last carried anything; zero when offline.
func (h *Hub) LastSeen(fingerprint string, deviceID uint64) time.Time {
	if c := h.liveOf(fingerprint, deviceID); c != nil {
		return c.seen()
	}
	return time.Time{}
}

// Presence is Online and LastSeen of many devices at once, for a list of
// them (fingerprint to device id): the devices with a live link, each
// with when it last carried anything, by fingerprint.
func (h *Hub) Presence(devices map[string]uint64) map[string]time.Time {
	out := make(map[string]time.Time)
	h.mu.Lock()
	live := make(map[string]*conn)
	for fp, id := range devices {
		if c := h.conns[fp]; c != nil && c.dev.ID == id && !c.closed() {
			live[fp] = c
		}
	}
	h.mu.Unlock()
	for fp, c := range live {
		out[fp] = c.seen()
	}
	return out
}

// Count is the number of registered links, those still in their close
// handshake included.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}
