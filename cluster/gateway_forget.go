package cluster

import (
	"time"

	"github.com/simrelay/simrelay/internal/retention"
)

// What the node remembers of the links of dead nodes it took over, and for
// how long: the hub's rule (gateway/forget.go, internal/retention), for the
// same reasons.
//
// An orphan entry is written when this node's sweep ends the open link of a
// dead node, or when its failover first finds a device whose last link
// ended on a node gone since (takeOver). Its at answers OfflineSince; its
// place keeps the failover from moving a job that the dead link may have
// handed to the phone (HoldDevice).
//
// The dead link handed nothing after at, and a job handed to a phone stays
// queued at most GatewayConfig.JobLife (sms.MaxQueuedLife) after that: once
// JobLife has passed since at, every job at or below place was sent, failed
// or expired, so place holds nothing back. And past the longest
// failover_after (a week, well below JobLife) the failover counts a device
// it has no end time for as offline since the server started, which decides
// the same as at. So an entry is dropped once JobLife has passed since it
// was written; the scan runs from the sweep at most once per
// retention.ScanEvery.
//
// A dropped entry is not taken again: HoldDevice takes a device over only
// while its last link ended less than JobLife ago by the database's clock
// (HoldLink's endedAgo), and that link ended before the entry was written.
// Without that, the failover would start counting failover_after afresh
// and hold the jobs queued since the first take until they expire.
// So the map holds the devices taken over in about the last JobLife, not
// every device whose node died since the start, deleted ones included.
//
// Entries are kept by device id, not fingerprint: a device deleted and its
// fingerprint paired again is a new device (a new id, its link epochs
// counting from 1 again), and what this node took over of the old one
// (when, the queue place, the epoch) says nothing of it. Kept by
// fingerprint, the new device counted offline from the old one's take, and
// a link of its own taken over at an epoch the old one's entry held was
// not taken afresh: the jobs that link handed to the phone moved too.

// orphan is a link of a dead node that this node took over: when, and the
// queue place then (the dead link handed nothing above it to the phone).
// epoch is the link's when the failover took it over (takeOver), and 0 when
// this node's sweep ended it: the device's row then names this node, and a
// row that names another node again is of a later link (or of the same one,
// reopened by its node), which is taken afresh.
type orphan struct {
	at    time.Time
	place uint64
	epoch uint64
}

// forgetOld drops the orphan entries older than the jobs' life, at most
// once per retention.ScanEvery; g.mu held.
func (g *Gateway) forgetOld(now time.Time) {
	if g.forgot.Due(now) {
		retention.Prune(&g.forgot, g.orphans, now, func(o orphan) time.Time { return o.at })
	}
}
