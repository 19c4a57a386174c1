package cluster

import (
	"fmt"
	"time"
)

// Where a device is linked, for the API, the console and device presence:
// the node's own links first, then the database (a link not ended, on a
// live node).

// linkedElsewhere answers when the node holding the device's link on
// another live node last beat.
func (g *Gateway) linkedElsewhere(fingerprint string) (time.Time, bool, error) {
	seen, ok, err := g.st.LinkedSince(fingerprint, g.cfg.Live)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("cluster: where is %s linked: %w", fingerprint, err)
	}
	return seen, ok, nil
}

// Online reports whether the device is linked on any live node.
func (g *Gateway) Online(fingerprint string) bool {
	if g.hub.Online(fingerprint) {
		return true
	}
	_, ok, err := g.linkedElsewhere(fingerprint)
	if err != nil {
		g.log.Error("gateway: online", "err", err)
	}
	return ok
}

// LastSeen is when the device's link last carried anything: exact for a
// link here; for a link on another node, that node's last beat (the link
// was live then). Zero when offline.
func (g *Gateway) LastSeen(fingerprint string) time.Time {
	if t := g.hub.LastSeen(fingerprint); !t.IsZero() {
		return t
	}
	seen, _, err := g.linkedElsewhere(fingerprint)
	if err != nil {
		g.log.Error("gateway: last seen", "err", err)
	}
	return seen.UTC()
}

// Presence is Online and LastSeen of many devices at once, for a list of
// them (GET /device/list, the console's devices page): the devices online,
// each with when it was last seen, as those two say. The node's own links
// answer first; the others are asked of the database in one statement, not
// two per device. When the database does not answer, they are offline, as
// Online says then.
func (g *Gateway) Presence(fingerprints []string) map[string]time.Time {
	out := g.hub.Presence(fingerprints)
	rest := make([]string, 0, len(fingerprints)-len(out))
	for _, fp := range fingerprints {
		if _, here := out[fp]; !here {
			rest = append(rest, fp)
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
	for fp, t := range seen {
		out[fp] = t.UTC()
	}
	return out
}

// PresenceOnline is Online for the offline check of device presence: when
// the database does not answer it says online, so that no device is
// reported offline (and mailed about) for the database's trouble.
func (g *Gateway) PresenceOnline(fingerprint string) bool {
	if g.hub.Online(fingerprint) {
		return true
	}
	_, ok, err := g.linkedElsewhere(fingerprint)
	if err != nil {
		g.log.Warn("gateway: offline check skipped, the database did not answer", "device", fingerprint, "err", err)
		return true
	}
	return ok
}
