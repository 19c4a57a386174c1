// Package retention is the one rule by which a node forgets what it keeps
// per device for the jobs handed to its links: the hub's end times and
// queue places (gateway/forget.go), and the cluster gateway's links taken
// over from dead nodes (cluster/gateway_forget.go).
//
// Each such entry matters only while a job it covers may still be queued:
// at most a job's longest life (sms.MaxQueuedLife) after the entry was last
// written. So an entry is dropped once that life has passed since, and the
// maps are scanned at most once per ScanEvery: they then hold the devices
// of about the last life, not every device linked since the start, deleted
// ones included.
package retention

import "time"

// ScanEvery is how often at most the maps are scanned: often enough that
// what is dropped is dropped within the hour, rare enough that a scan of
// many devices under its owner's lock is nothing in its time.
const ScanEvery = time.Hour

// Sweep is when the maps one lock guards were last scanned, and how long
// their entries live. Its owner's lock guards it; the zero time of its
// last scan makes the first Due true.
type Sweep struct {
	// Life is how long an entry is kept after it was last written: a
	// job's longest life (sms.MaxQueuedLife).
	Life time.Duration
	last time.Time
}

// Due reports whether a scan is due at now, at most one per ScanEvery,
// and counts it as run when it is.
func (s *Sweep) Due(now time.Time) bool {
	if now.Sub(s.last) < ScanEvery {
		return false
	}
	s.last = now
	return true
}

// Prune drops the entries of m last written (as written tells) s.Life or
// more before now.
func Prune[K comparable, V any](s *Sweep, m map[K]V, now time.Time, written func(V) time.Time) {
	for k, v := range m {
		if now.Sub(written(v)) >= s.Life {
			delete(m, k)
		}
	}
}
