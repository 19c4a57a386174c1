package gateway

import (
	"bytes"
	"context"
	"errors"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
)

// What the rest of the server tells a device's live link.

// Disconnect closes the device's link (fingerprint and id), if any, with code (4501 token
// revoked, 4503 deleted or disabled). The channel it returns is closed once
// the device's last seen is stored (for a link the server is closing
// already, by the close under way; for one the network cut, by its end,
// which keeps it registered until then): a caller that answers a request next
// (the device disabled, deleted or paired again) waits on it, so that a
// read right after the answer shows the link's last activity, not the time
// its hello stored. One that answers nobody (a cluster node running the
// control of a request another node answered) need not wait, and a store
// write that takes long (a database under strain) does not hold it up.
//
// Every Disconnect follows a change of the device (its token revoked, the
// device disabled or deleted) made after any older link of it was looked
// at: the link registered now is told so (conn.told), and the older link
// it displaced while its own look went on, if any, is closed as it is
// (PROTOCOL.md 7.3), whichever way that look ends. The fingerprint's link
// of another device (the one paired again under the fingerprint after the
// device was deleted) is left open.
func (h *Hub) Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{} {
	h.mu.Lock()
	c := h.conns[fingerprint]
	if c != nil && c.dev.ID != deviceID {
		c = nil
	}
	if c != nil {
		c.told = &refusal{code: code, reason: reason}
	}
	h.mu.Unlock()
	if c != nil {
		return c.closeWith(code, reason)
	}
	return noWait
}

// DisconnectChanged is Disconnect for a control another node of a cluster
// sent, which answers no request here. The control names the device (one
// of a node of an older version, the fingerprint alone), not its token, and
// may arrive late (a bus that reconnected sends what it held), after the
// fingerprint was paired again (over the device: a new token; or, for an
// older node's, after a delete: another device) and linked here: closing that link with 4503 would stop its phone reconnecting,
// with 4501 would have it pair again. So the link here is closed only when
// a look at the store now finds its device changed as a Disconnect says:
// deleted (no device of the fingerprint, or another one), disabled, or its
// token replaced; with the code the look found (the control's reason when
// the codes agree). When the store does not answer, it is closed as told,
// and DisconnectChanged answers false. A control that names its device
// (deviceID, not 0) is of that device only: the fingerprint's link of
// another device is left open without a look; 0 (a control from a node of
// an older version) is of whichever link holds the fingerprint.
func (h *Hub) DisconnectChanged(fingerprint string, deviceID uint64, code int, reason string) bool {
	c := h.live(fingerprint)
	if c == nil || deviceID != 0 && c.dev.ID != deviceID {
		return true
	}
	answered := true
	found, why := code, reason
	d, err := h.devices.Get(context.Background(), c.dev.CompanyID, fingerprint)
	switch {
	case notFound(err) || err == nil && d.ID != c.dev.ID:
		found, why = proto.CloseDeviceGone, "device deleted"
	case err != nil:
		h.log.Warn("look up a device told to disconnect by another node; closed as told", "device", fingerprint, "err", err)
		answered = false
	case d.Status == store.DeviceDisabled:
		found, why = proto.CloseDeviceGone, "device disabled"
	case !bytes.Equal(d.TokenHash, c.dev.TokenHash):
		found, why = proto.CloseBadToken, "token revoked"
	default:
		return true // the control was of another registration of the fingerprint
	}
	if found == code {
		why = reason
	}
	h.mu.Lock()
	if h.conns[fingerprint] == c {
		c.told = &refusal{code: found, reason: why}
	}
	h.mu.Unlock()
	c.closeWith(found, why)
	return answered
}

// toldBy is the last Disconnect that found c registered; nil when none did.
func (h *Hub) toldBy(c *conn) *refusal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return c.told
}

// Configure gives the device's link, if any, a config frame of the
// device's settings after a change, as a read of the store finds them now:
// two changes made at once (two requests, on one node or two) may call
// Configure in the other order than they wrote, and the frame the phone
// gets last must hold what the store holds last, not the older change's
// settings. The reads and frames of one link are taken one at a time
// (settled), so the last frame is read after every write whose Configure
// came before it. cfg, the change's own settings, stands in when the store
// does not answer. A device deleted meanwhile (another of the fingerprint,
// or none) or disabled gets nothing: its close follows.
func (h *Hub) Configure(fingerprint string, deviceID uint64, cfg proto.Config) {
	c := h.lookupOf(fingerprint, deviceID)
	if c == nil {
		return
	}
	c.settled(func(d store.Device, err error) {
		if err != nil {
			c.send(cfg)
			return
		}
		c.send(configOf(d))
	})
}

// Pace gives the device's link, if any, its sends a minute (0: no pacing)
// as a read of the store finds them now: as Configure, so that the link
// keeps the pace of the change the store kept, whichever order two
// changes' calls came in; perMinute stands in when the store does not
// answer. The link's own pump goroutine takes the pace and pumps
// (paceLater, as a kick): the caller, a request that changed the device's
// settings, waits neither for a pump under way nor for a failover's hold
// of the device (HoldDevice), only for the read.
func (h *Hub) Pace(fingerprint string, deviceID uint64, perMinute int) {
	c := h.lookupOf(fingerprint, deviceID)
	if c == nil {
		return
	}
	c.settled(func(d store.Device, err error) {
		if err != nil {
			c.paceLater(perMinute)
		} else {
			c.paceLater(d.SMSPerMinute)
		}
	})
}

// settled reads c's device from the store and hands it to apply, one call
// at a time per link (cfgMu), the link's setup from its second look to its
// pace included: what apply gives the link is never older than what an
// earlier call gave it. apply gets the store's error when it did not
// answer; it is not called when the device is no longer c's (deleted) or is
// disabled: the change's close follows.
func (c *conn) settled(apply func(store.Device, error)) {
	h := c.hub
	c.cfgMu.Lock()
	defer c.cfgMu.Unlock()
	if refused, cause := h.gate.refuse(h.now()); refused {
		// Known out of reach: no read to wait out its deadline (a cluster's
		// node running, as told, the controls heard after a look failed),
		// but for one a probeEvery, as for upgrades: with every phone
		// still linked, no upgrade would ask the store again.
		apply(store.Device{}, cause)
		return
	}
	d, err := h.devices.Get(context.Background(), c.dev.CompanyID, c.dev.Fingerprint)
	if !errors.Is(err, store.ErrUnavailable) {
		h.gate.answered()
	}
	switch {
	case notFound(err) || err == nil && (d.ID != c.dev.ID || d.Status == store.DeviceDisabled):
		return
	case err != nil:
		if errors.Is(err, store.ErrUnavailable) {
			h.gate.failed(h.now(), err)
		}
		h.log.Warn("look up a device whose settings changed; applied as told", "device", c.dev.Fingerprint, "err", err)
	}
	apply(d, err)
}

// configOf is the config frame of d's settings.
func configOf(d store.Device) proto.Config {
	return proto.Config{SelectedSIM: d.SelectedSIM, DeviceName: d.Name, Status: d.Status}
}

// Refresh is Configure and Pace for a settings or pace control another
// node of a cluster sent, which may arrive late (a bus that reconnected
// sends what it held), after a later change of the device heard first, or,
// from a node of an older version (deviceID 0), naming the fingerprint
// alone, after the fingerprint was paired again and linked here. So the
// link here gets what a look at the store finds for its own device now
// (one read, in its turn with Configure's and Pace's: settled): its
// settings, as a config frame, and its pace, as its welcome did. A link
// whose device is no longer the fingerprint's gets nothing (its device was
// deleted: the disconnect, or the cluster's sweep, closes it), nor does
// one of another device than deviceID (not 0), nor one of a device
// disabled (its disconnect closes it). It answers false when the store did
// not answer: the caller applies the control as told. As Pace, it leaves
// the pace and the pump to the link's pump goroutine: the node's controls,
// run one after another, do not wait for a failover's hold of a device.
func (h *Hub) Refresh(fingerprint string, deviceID uint64) bool {
	c := h.live(fingerprint)
	if c == nil || deviceID != 0 && c.dev.ID != deviceID {
		return true
	}
	answered := true
	c.settled(func(d store.Device, err error) {
		if err != nil {
			answered = false
			return
		}
		c.send(configOf(d))
		c.paceLater(d.SMSPerMinute)
	})
	return answered
}

// Kick tells the hub that new jobs wait for the device (fingerprint and
// id); the fingerprint's link of another device is not pumped. It returns
// at once: the link's own goroutine pumps (conn.kick), so that a send's
// answer waits neither for the link's read of its queue nor for a
// failover moving the device's jobs (HoldDevice). The jobs must be durable
// before the call: the pump reads the queue after it.
func (h *Hub) Kick(fingerprint string, deviceID uint64) {
	h.KickLinked(fingerprint, deviceID, false)
}

// Release is Kick after agent jobs the device's link passed over may have
// become its own: another agent that was handed them was deleted, or
// linked again with a hello whose jobs do not name them (hello.jobs), or
// their number, paused as a job was handed out, was resumed. The link reads its
// numbers' queues again from the first job it passed over (PROTOCOL.md
// section 16.1), as well as the jobs past its queues' ends. It returns at
// once, as Kick does.
func (h *Hub) Release(fingerprint string, deviceID uint64) {
	h.KickLinked(fingerprint, deviceID, true)
}

// KickLinked is Kick, or Release when release is true, of the device's
// link here when it is open (Online), and says whether it was: false, with
// nothing done, when the device has no open link here. The cluster's
// gateway kicks a device's link here, or else tells the other nodes, with
// one look-up of the link, not one for Online and another for Kick.
func (h *Hub) KickLinked(fingerprint string, deviceID uint64, release bool) bool {
	c := h.liveOf(fingerprint, deviceID)
	if c == nil {
		return false
	}
	c.kick(release)
	return true
}

// Repump is Release pumped on the caller's goroutine, which waits for the
// pump (and for a failover's hold of the device): for a sweep that pumps
// every link of the node in turn (cluster.Gateway's), so that thousands of
// links read their queues one after another, not each on a goroutine of
// its own at once.
func (h *Hub) Repump(fingerprint string, deviceID uint64) {
	if c := h.lookupOf(fingerprint, deviceID); c != nil {
		c.repump()
	}
}
