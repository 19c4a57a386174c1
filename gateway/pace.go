package gateway

// A device's SMS pace (sms_per_minute): one limiter per device, kept by
// the hub across the device's links.

import (
	"time"

	"golang.org/x/time/rate"
)

// paceSweepEvery is how often at most the hub scans its paces for those
// to forget: a pace's window is at most a minute (1 a minute).
const paceSweepEvery = time.Minute

// devicePace is a device's pace: its limiter, which knows when the last
// send went out, shared by the device's links (an older link still
// closing and the new one) and kept after the last of them ended for as
// long as it holds a send back (its window, minute/perMinute). A link that
// started with a limiter of its own, full, let a send out at once after a
// reconnect, however soon after the last link's send.
type devicePace struct {
	lim       *rate.Limiter
	perMinute int
	links     int       // the device's links that pace by it
	freed     time.Time // when the last of them let it go (the limiter's clock)
}

// window is how long after freed the pace still holds a send back: by
// then its limiter is full again, as a new one is.
func (p *devicePace) window() time.Duration { return time.Minute / time.Duration(p.perMinute) }

// holdPace is the device's limiter at perMinute (> 0) for one more of its
// links: the one its last link left, if the hub still keeps it, its rate
// changed as setPace changes a link's (SetLimit), else a new one.
func (h *Hub) holdPace(deviceID uint64, perMinute int) *rate.Limiter {
	h.paceMu.Lock()
	defer h.paceMu.Unlock()
	p := h.paces[deviceID]
	if p == nil {
		p = &devicePace{lim: rate.NewLimiter(rate.Every(time.Minute/time.Duration(perMinute)), 1), perMinute: perMinute}
		h.paces[deviceID] = p
	} else if p.perMinute != perMinute {
		p.lim.SetLimit(rate.Every(time.Minute / time.Duration(perMinute)))
		p.perMinute = perMinute
	}
	p.links++
	return p.lim
}

// repace changes the device's pace to perMinute (> 0), held by a link of
// it; it says whether the rate changed.
func (h *Hub) repace(deviceID uint64, perMinute int) bool {
	h.paceMu.Lock()
	defer h.paceMu.Unlock()
	p := h.paces[deviceID]
	if p == nil || p.perMinute == perMinute {
		return false
	}
	p.lim.SetLimit(rate.Every(time.Minute / time.Duration(perMinute)))
	p.perMinute = perMinute
	return true
}

// releasePace is a link of the device no longer pacing by its limiter
// (its pace turned off, or the link ended). The last to let it go leaves
// it to the device's next link, for the pace's window.
func (h *Hub) releasePace(deviceID uint64) {
	now := time.Now()
	h.paceMu.Lock()
	defer h.paceMu.Unlock()
	if p := h.paces[deviceID]; p != nil {
		p.links--
		if p.links == 0 {
			p.freed = now
		}
	}
	if now.Sub(h.pacesSwept) >= paceSweepEvery {
		h.pacesSwept = now
		h.forgetPaces(now)
	}
}

// forgetPaces drops the paces no link holds whose window ended by now:
// the hub keeps those of devices whose last link ended within about
// the last two minutes (a window and a sweep), not every device linked
// since it started; paceMu held.
func (h *Hub) forgetPaces(now time.Time) {
	for id, p := range h.paces {
		if p.links == 0 && now.Sub(p.freed) >= p.window() {
			delete(h.paces, id)
		}
	}
}

// setPace spaces sends evenly: one every minute/perMinute, no bursts, which
// is what keeps a phone under Android's per-app SMS quota. The limiter is
// the device's (holdPace), so a new link goes on from the last send of
// the one before. An unchanged rate keeps its limiter, so that a settings
// change of another kind does not let a send out early; a changed one
// keeps it too, at the new rate (SetLimit: the time since the last send
// counts at the old rate up to now, then at the new one). A new limiter,
// full, let a send out at once, however soon after the last: a pace
// changed from 1 a minute to 2 sent the next a moment after the one
// before, not 30 s after it. A link that ended (finish) takes no pace.
func (c *conn) setPace(perMinute int) {
	c.pumpMu.Lock()
	defer c.pumpMu.Unlock()
	c.setPaceHeld(perMinute)
}

// setPaceHeld is setPace with pumpMu held.
func (c *conn) setPaceHeld(perMinute int) {
	switch {
	case c.paceEnded:
		return
	case perMinute <= 0:
		if c.pace == nil {
			return
		}
		c.hub.releasePace(c.dev.ID)
		c.pace = nil
	case c.pace == nil:
		c.pace = c.hub.holdPace(c.dev.ID, perMinute)
	case !c.hub.repace(c.dev.ID, perMinute):
		return
	}
	// A wait armed for the old pace is not the new one's: the next pump
	// arms its own. Kept, a pace raised from 1 a minute held the send after
	// the next for the rest of the old minute.
	if c.paceTimer != nil {
		c.paceTimer.Stop()
		c.paceTimer = nil
	}
}

// paceLater gives the link the pace perMinute for its pump to take
// (nextPace) and kicks it, without waiting for pumpMu: the caller (a
// settings change's request, a cluster's control) does not wait for a
// pump under way or a failover's hold of the device. cfgMu held
// (settled), so that the last pace given is the newest read.
func (c *conn) paceLater(perMinute int) {
	c.nextPace.Store(int64(perMinute))
	c.kick(false)
}

// takePace sets the pace the link was last given (nextPace), if no pump
// took it yet; pumpMu held, before the pump sends. A pace given while
// this pump goes on is taken by the pump its kick starts.
func (c *conn) takePace() {
	if p := c.nextPace.Swap(-1); p >= 0 {
		c.setPaceHeld(int(p))
	}
}

// endPace lets the device's pace go as the link ends; pumpMu held.
func (c *conn) endPace() {
	c.paceEnded = true
	if c.paceTimer != nil {
		c.paceTimer.Stop()
	}
	if c.pace != nil {
		c.hub.releasePace(c.dev.ID)
		c.pace = nil
	}
}
