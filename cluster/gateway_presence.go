package cluster

import (
	"fmt"
	"time"
)

// Where a device is linked, for the API, the console and device presence:
// the node's own links first, then the database (a link not ended, on a
// live node). Both go by the device (fingerprint and id): a link here of
// another device of the fingerprint (one deleted whose link is not closed
// yet) says nothing of the device paired again after it.

// linkedElsewhere answers when the node holding the device's link on
// another live node last beat.
func (g *Gateway) linkedElsewhere(deviceID uint64) (time.Time, bool, error) {
	seen, ok, err := g.st.LinkedSince(deviceID, g.cfg.Live)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("cluster: where is device %d linked: %w", deviceID, err)
	}
	return seen, ok, nil
}

// Online reports whether the device is linked on any live node.
func (g *Gateway) Online(fingerprint string, deviceID uint64) bool {
	if g.hub.Online(fingerprint, deviceID) {
		return true
	}
	_, ok, err := g.linkedElsewhere(deviceID)
	if err != nil {
		g.log.Error("gateway: online", "err", err)
	}
	return ok
}

// LastSeen is when the device's link last carried anything: exact for a
// link here; for a link on another node, that node's last beat (the link
// was live then). Zero when offline.
func (g *Gateway) LastSeen(fingerprint string, deviceID uint64) time.Time {
	if t := g.hub.LastSeen(fingerprint, deviceID); !t.IsZero() {
		return t
	}
	seen, _, err := g.linkedElsewhere(deviceID)
	if err != nil {
		g.log.Error("gateway: last seen", "err", err)
	}
	return seen.UTC()
}

// Presence is Online and LastSeen of many devices at once (fingerprint to
// device id), for a list of them (GET /device/list, the console's devices
// page): the devices online, each with when it was last seen, as those two
// say. The node's own links answer first; the others are asked of the
// database in one statement, not two per device. When the database does
// not answer, they are offline, as Online says then.
func (g *Gateway) Presence(devices map[string]uint64) map[string]time.Time {
	out := g.hub.Presence(devices)
	rest := make([]uint64, 0, len(devices)-len(out))
	fps := make(map[uint64]string, len(devices)-len(out))
	for fp, id := range devices {
		if _, here := out[fp]; !here {
			rest = append(rest, id)
			fps[id] = fp
		}
	}
	if len(rest) == 0 {
		return out
	}
	seen, err := g.st.LinkedSinceMany(rest, g.cfg.Live)
	if err != nil {
		g.log.Error("gateway: presence", "err", fmt.Errorf("cluster: where are %d devices linked: %w", len(rest), err))
		return out
	}
	for id, t := range seen {
		out[fps[id]] = t.UTC()
	}
	return out
}

// PresenceOnline is Online for the offline check of device presence: when
// the database does not answer it says online, so that no device is
// reported offline (and mailed about) for the database's trouble.
func (g *Gateway) PresenceOnline(fingerprint string, deviceID uint64) bool {
	if g.hub.Online(fingerprint, deviceID) {
		return true
	}
	_, ok, err := g.linkedElsewhere(deviceID)
	if err != nil {
		g.log.Warn("gateway: offline check skipped, the database did not answer", "device", fingerprint, "err", err)
		return true
	}
	return ok
}
