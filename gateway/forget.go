package gateway

import "time"

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
// past a week) has passed since they were last written. The scan of both
// maps runs from unregister at most once per forgetEvery: the maps grow
// only as links carry jobs and end, so they hold the devices of about the
// last JobLife, not every device linked since the start, deleted ones
// included.

// forgetEvery is how often at most the maps are scanned: often enough that
// what is dropped is dropped within the hour, rare enough that a scan of
// many devices under the hub's lock is nothing in its time.
const forgetEvery = time.Hour

// dispatchMark is the highest queue place written to any of a device's
// links, and when a job was last written to one.
type dispatchMark struct {
	upTo uint64
	at   time.Time
}

// forgetOld drops the entries of endedAt and dispatched older than the
// jobs' life, at most once per forgetEvery; mu held.
func (h *Hub) forgetOld(now time.Time) {
	if now.Sub(h.forgotAt) < forgetEvery {
		return
	}
	h.forgotAt = now
	for fp, at := range h.endedAt {
		if now.Sub(at) >= h.cfg.JobLife {
			delete(h.endedAt, fp)
		}
	}
	for id, d := range h.dispatched {
		if now.Sub(d.at) >= h.cfg.JobLife {
			delete(h.dispatched, id)
		}
	}
}
