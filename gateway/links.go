package gateway

import (
	"errors"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
)

// Epochs fences a device's links across the nodes of a cluster
// (cluster.Gateway): each link registered takes the device's next epoch,
// and a link whose epoch is no longer the newest is closed with 4009 by
// the node that holds it (FenceDevice). Nil on one node, where the hub's own
// map is the only place a link can be.
type Epochs interface {
	// Claim makes a link just registered the device's newest across the
	// cluster, tells the other nodes, and answers its epoch. It runs on
	// the link's set-up goroutine before the link's first pump.
	Claim(dev store.Device) (epoch uint64, err error)
	// Ended says the device's registered link of that epoch ended, once
	// per link: as the server begins to close it (the close handshake can
	// wait seconds on a phone that does not read, and the device is offline
	// from the decision on every node), or on the link's reader as it ends.
	Ended(dev store.Device, epoch uint64)
}

// SetEpochs wires the cluster's fencing; call it before serving.
func (h *Hub) SetEpochs(e Epochs) { h.epochs = e }

// Link is a registered link as the cluster's sweep sees it.
type Link struct {
	Fingerprint string
	DeviceID    uint64
	Epoch       uint64
}

// Links lists the open registered links whose epoch is claimed. A link
// the server is closing is not one: the cluster heard it ended as the
// server decided (ended), and its row, reopened by the sweep (reopen)
// while the close handshake kept it registered, would stay open after it,
// its end told already: the device linked on every node until it links
// again.
func (h *Hub) Links() []Link {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Link, 0, len(h.conns))
	for fp, c := range h.conns {
		if e := c.epoch.Load(); e != 0 && !c.closed() {
			out = append(out, Link{Fingerprint: fp, DeviceID: c.dev.ID, Epoch: e})
		}
	}
	return out
}

// LinkDevice is the device id of the fingerprint's open registered link
// here, its epoch claimed or not; false when none.
func (h *Hub) LinkDevice(fingerprint string) (uint64, bool) {
	if c := h.live(fingerprint); c != nil {
		return c.dev.ID, true
	}
	return 0, false
}

// FenceDevice closes the device's link here with 4009 when its epoch is
// older than newest: a newer link of the device registered on another
// node. A link still claiming its epoch keeps newest and checks it once it
// has one. The fingerprint's link here of another device (one paired again
// under the fingerprint after a delete, or the one deleted), whose epochs
// are its own, is left open.
func (h *Hub) FenceDevice(fingerprint string, deviceID, newest uint64) {
	if c := h.lookup(fingerprint); c != nil && c.dev.ID == deviceID {
		c.fence(newest)
	}
}

// linkOf is the registered link that l names (Links): the device's, of
// l's epoch; nil when the fingerprint's link here is another one since (a
// newer link of the device, or of a device paired again under the
// fingerprint after a delete, whose epochs count from 1 again), or none.
// h.mu held.
func (h *Hub) linkOf(l Link) *conn {
	c := h.conns[l.Fingerprint]
	if c == nil || l.Epoch == 0 || c.dev.ID != l.DeviceID || c.epoch.Load() != l.Epoch {
		return nil
	}
	return c
}

// DisconnectLink is Disconnect of the link l names only (Links), with the
// same code and reason: a link registered here since l was listed is left
// open. The cluster's sweep closes by it a link it read before its
// database reads, which a device re-enabled and linked here again can
// outrun: a close by fingerprint would close the new link with 4503, and
// its phone would stop reconnecting, probing at most every 15 minutes
// (PROTOCOL.md, section 13).
func (h *Hub) DisconnectLink(l Link, code int, reason string) <-chan struct{} {
	h.mu.Lock()
	c := h.linkOf(l)
	if c != nil {
		c.told = &refusal{code: code, reason: reason}
	}
	h.mu.Unlock()
	if c != nil {
		return c.closeWith(code, reason)
	}
	return noWait
}

// FenceLink is FenceDevice of the link l names only (Links): a link registered
// here since l was listed (that of a device paired again under the
// fingerprint, whose epochs count from 1 again) is left open.
func (h *Hub) FenceLink(l Link, newest uint64) {
	h.mu.Lock()
	c := h.linkOf(l)
	h.mu.Unlock()
	if c != nil {
		c.fence(newest)
	}
}

// fence records that a link of the device of epoch newest registered
// elsewhere, and closes c if its own epoch is older.
func (c *conn) fence(newest uint64) {
	for cur := c.fencedBy.Load(); newest > cur && !c.fencedBy.CompareAndSwap(cur, newest); cur = c.fencedBy.Load() {
	}
	c.checkFence()
}

// checkFence closes the link if a newer epoch than its own was heard of.
// fence stores before it loads, and claim the other way round, so a fence
// arriving while the link claims is seen by one of the two.
func (c *conn) checkFence() {
	if e := c.epoch.Load(); e != 0 && e < c.fencedBy.Load() {
		c.closeWith(proto.CloseReplaced, replacedReason)
	}
}

// claim takes the link's epoch in a cluster; false when the database did
// not answer (the link is refused: it could not be fenced), the link then
// closed: with 1013 when the database is out of reach, 4012 otherwise.
func (c *conn) claim() bool {
	h := c.hub
	if h.epochs == nil {
		return true
	}
	e, err := h.epochs.Claim(c.dev)
	if errors.Is(err, store.ErrUnavailable) {
		c.storeFault(err, "claim the device's link in the cluster", "device", c.dev.Fingerprint)
		return false
	}
	if err != nil {
		h.log.Error("claim the device's link in the cluster", "device", c.dev.Fingerprint, "err", err)
		c.closeWith(proto.CloseRestarting, "server restarting")
		return false
	}
	c.epoch.Store(e)
	c.checkFence()
	return true
}

// ended tells the cluster that the link ended, once: when the server
// begins to close it, or when it is unregistered. A link that has not
// claimed its epoch yet has nothing to end (its claim comes later, and
// its end then).
func (c *conn) ended() {
	e := c.epoch.Load()
	if e == 0 || c.hub.epochs == nil || !c.toldEnded.CompareAndSwap(false, true) {
		return
	}
	c.hub.epochs.Ended(c.dev, e)
}
