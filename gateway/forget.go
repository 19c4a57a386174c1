package gateway

import (
	"time"

	"github.com/simrelay/simrelay/internal/retention"
)

// What the hub remembers of a device after its links end, and for how long.
//
// endedAt (OfflineSince) tells the failover sweep how long a device has been
// offline. Past the longest failover_after (a week) the sweep counts a
// device it has no end time for as offline since the server started, which
// decides the same: the entry no longer matters.
//
// dispatched (HoldDevice's dispatchedUpTo) keeps the failover from moving a
// job that a link may have handed to the phone, acknowledged or not. It
// matters while such a job may still be queued: at most Config.JobLife, a
// job's longest time to live (sms.MaxQueuedLife), after the device's last
// dispatch; by then every job it covers was sent, failed or expired.
//
// So both entries are dropped once Config.JobLife (a month or more, well
// past a week) has passed since they were last written: the rule of
// internal/retention, which the cluster's gateway applies to its own map.
// The scan of both maps runs from unregister at most once per
// retention.ScanEvery.

// dispatchMark is the highest queue place written to any of a device's
// links, and when a job was last written to one.
type dispatchMark struct {
	upTo uint64
	at   time.Time
}

// forgetOld drops the entries of endedAt and dispatched older than the
// jobs' life, at most once per retention.ScanEvery; mu held.
func (h *Hub) forgetOld(now time.Time) {
	if !h.forgot.Due(now) {
		return
	}
	retention.Prune(&h.forgot, h.endedAt, now, func(at time.Time) time.Time { return at })
	retention.Prune(&h.forgot, h.dispatched, now, func(d dispatchMark) time.Time { return d.at })
}
