package gateway

import proto "github.com/simrelay/simrelay/android-protocol"

// What the rest of the server tells a device's live link.

// Disconnect closes the device's link, if any, with code (4501 token
// revoked, 4503 deleted or disabled). Its caller answers a request next
// (the device disabled, deleted or paired again): it returns once the
// device's last seen is stored, so that a read right after the answer
// shows the link's last activity, not the time its hello stored.
func (h *Hub) Disconnect(fingerprint string, code int, reason string) {
	if c := h.lookup(fingerprint); c != nil {
		c.closeLink(code, reason, nil, true)
	}
}

// DisconnectLater is Disconnect for a caller that answers nobody next (a
// cluster node running the control of a request another node answered):
// the last seen is stored on a goroutine of its own, as for the hub's
// other closes, so that a store write that takes long (a database under
// strain) does not hold up what the caller does next.
func (h *Hub) DisconnectLater(fingerprint string, code int, reason string) {
	if c := h.lookup(fingerprint); c != nil {
		c.closeWith(code, reason)
	}
}

// Configure pushes changed settings to the device's link, if any.
func (h *Hub) Configure(fingerprint string, cfg proto.Config) {
	if c := h.lookup(fingerprint); c != nil {
		c.send(cfg)
	}
}

// Pace changes how many sends a minute the device's link may carry (0: no
// pacing); it takes effect at once on a live link.
func (h *Hub) Pace(fingerprint string, perMinute int) {
	if c := h.lookup(fingerprint); c != nil {
		c.setPace(perMinute)
		c.pump()
	}
}

// Kick tells the hub that new jobs wait for the device.
func (h *Hub) Kick(fingerprint string) {
	if c := h.lookup(fingerprint); c != nil {
		c.kick()
	}
}
