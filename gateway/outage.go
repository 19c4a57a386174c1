package gateway

// The store out of reach: links refused or closed with the signal that
// brings their phones back within seconds of its return (PROTOCOL.md
// section 14), and the upgrades refused from memory while it lasts.

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/store"
)

// probeEvery is how often, while the hub knows the store is out of reach,
// one phone's upgrade is let through to ask it again; the others are
// answered 503 at once, from memory. A fleet reconnecting through an
// outage thus costs the database one attempt a second, not one per phone
// (each of which, on a network that drops its packets, holds a connection
// for the whole connect timeout), and costs the store's return at most
// this much.
const probeEvery = time.Second

// pumpGrace is how long after the first failure of an outage links' pumps
// still read the store as usual (gated): a failure may be one slow
// transaction or one broken connection of the pool, which the next read
// that answers undoes (reached), where closing every link whose queue is
// read meanwhile would send hundreds of a busy node's phones away. Past
// it, with no read answered since, the store has stopped answering.
const pumpGrace = probeEvery

// storeGate is what the hub knows of its store being out of reach: since
// a store call of a link or an upgrade failed with store.ErrUnavailable,
// and until an upgrade's call, a settings control's read or a link's pump
// read answers again (the probe, at most probeEvery after the last
// failure; a link's reports, which are not gated, do not reopen it).
type storeGate struct {
	// isDown mirrors down for the calls on every send's path (a link's
	// pump asks at each send and ack), which read it without the lock
	// while the store answers.
	isDown    atomic.Bool
	mu        sync.Mutex
	down      bool      // the last store call seen failed with store.ErrUnavailable; guarded by mu
	err       error     // its error, for the log; guarded by mu
	since     time.Time // the first failure since the store last answered; guarded by mu
	nextProbe time.Time // when the next upgrade may ask the store; guarded by mu
}

// failed records that a store call failed with err, out of reach.
func (g *storeGate) failed(now time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		g.since = now
	}
	g.down, g.err, g.nextProbe = true, err, now.Add(probeEvery)
	g.isDown.Store(true)
}

// answered records that the store answered a call.
func (g *storeGate) answered() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down, g.err = false, nil
	g.isDown.Store(false)
}

// refuse says whether an upgrade at now is answered 503 without asking the
// store, with the error that closed the gate: it is while the store is
// known to be out of reach, but for one upgrade every probeEvery.
func (g *storeGate) refuse(now time.Time) (refused bool, cause error) {
	return g.refuseAfter(now, 0)
}

// refuseAfter is refuse for a call that the gate spares for grace after
// the outage's first failure: until then it asks the store as usual.
func (g *storeGate) refuseAfter(now time.Time, grace time.Duration) (refused bool, cause error) {
	if !g.isDown.Load() {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down || now.Sub(g.since) < grace {
		return false, nil
	}
	if !now.Before(g.nextProbe) {
		g.nextProbe = now.Add(probeEvery)
		return false, nil // this one asks the store
	}
	return true, g.err
}

// storeFault closes the link after a store call made for it failed with
// err, and logs what failed (msg, with attrs). A store out of reach closes
// with 1013 (try again later), which brings the phone back within seconds
// (PROTOCOL.md section 14), and is logged at most once per
// outage.LogEvery: an outage meets every phone that reports. Any other
// fault is the server's own and closes with 1011.
func (c *conn) storeFault(err error, msg string, attrs ...any) {
	h := c.hub
	if errors.Is(err, store.ErrUnavailable) {
		h.gate.failed(h.now(), err)
		if suppressed, ok := h.linksCut.Due(h.now(), outage.LogEvery); ok {
			h.log.Error(msg+": the database does not answer", append(attrs, "err", err, "suppressed", suppressed)...)
		}
		c.closeWith(proto.CloseTryAgainLater, "database unavailable")
		return
	}
	h.log.Error(msg, append(attrs, "err", err)...)
	c.closeWith(proto.CloseInternalError, "server error")
}

// gated closes the link with 1013, as storeFault does for a store out of
// reach, when the hub has known its store out of reach for pumpGrace and
// this is not the probe's turn (storeGate.refuseAfter), instead of a store
// call for the link
// (msg names it, for the log) that would wait out the store's deadline: a
// cluster's node that lost its database while the others commit and kick
// its phones would otherwise hold each kick 30 s, one after another, and
// its phones would leave one every 30 s instead of at once. It records no
// failure (the gate's next probe stays where it was). The phone comes back
// within seconds and its hello reads the queue from its start.
func (c *conn) gated(msg string) bool {
	h := c.hub
	now := h.now()
	refused, cause := h.gate.refuseAfter(now, pumpGrace)
	if !refused {
		return false
	}
	if suppressed, ok := h.linksCut.Due(now, outage.LogEvery); ok {
		h.log.Error(msg+": the database does not answer", "device", c.dev.Fingerprint, "err", cause, "suppressed", suppressed)
	}
	c.closeWith(proto.CloseTryAgainLater, "database unavailable")
	return true
}

// reached records that a store call of a link answered. While the hub knows
// the store out of reach only the probe's call gets to ask it (gated), but
// for pumpGrace after the first failure, and an answer opens the gate
// again, as an upgrade's or a settings read's.
func (h *Hub) reached() {
	if h.gate.isDown.Load() {
		h.gate.answered()
	}
}

// seenFault logs that the store did not take the last seen time of a link
// that ended (finish) or that the server decided to close (closeWithFrame).
// Every link that ends while the database is out of reach meets it, 10,000
// lines for as many phones: one line per outage.LogEvery says so, with how
// many were left out, and the hub knows the store out of reach, as at any
// store call of a link. Any other fault is logged each time.
func (h *Hub) seenFault(device string, err error) {
	if errors.Is(err, store.ErrUnavailable) {
		h.gate.failed(h.now(), err)
		if suppressed, ok := h.seenLost.Due(h.now(), outage.LogEvery); ok {
			h.log.Error("store last seen: the database does not answer", "device", device, "err", err, "suppressed", suppressed)
		}
		return
	}
	h.log.Error("store last seen", "device", device, "err", err)
}
