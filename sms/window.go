package sms

import (
	"fmt"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// Sending windows and per-message expiry (docs/routing.md).

// maxValidity bounds validity: as far as send_at may be ahead, so no
// message holds its place (and its plan credit) longer than a scheduled one.
const maxValidity = int64(MaxScheduleAhead / time.Second)

// MaxQueuedLife is the longest a job may stay queued after a link handed it
// to a phone, ttl being the service's time to live (Config.MessageTTL): a
// job expires at most its time to live (ttl, or validity or expires_at, each
// at most MaxScheduleAhead) after it may first go out, and no link hands it
// out sooner; the expiry sweep then takes it out of the queue, for which a
// day is left even past a store outage. The hub remembers what it handed
// to a device's links that long (gateway.Config.JobLife).
func MaxQueuedLife(ttl time.Duration) time.Duration {
	return max(ttl, MaxScheduleAhead) + 24*time.Hour
}

// sendPriority validates a send's priority: 0 (the default, today's
// first-in first-out queue) to store.MaxPriority.
func sendPriority(p int) error {
	if p < 0 || p > store.MaxPriority {
		return problem.Invalid("priority", fmt.Sprintf("must be 0 (the default) to %d; higher goes first", store.MaxPriority))
	}
	return nil
}

// sendWindow validates an optional window; errors name window.*.
func sendWindow(w *window.Window) error {
	if w == nil {
		return nil
	}
	return w.Validate("window")
}

// expiry is when a send expires unless a phone took it: expires_at as
// given, or validity seconds (or the service's time to live when neither
// is given) from when the message may first go out: now, or send_at, or
// the next opening of its window after that. fixed says expires_at set it,
// so a pool's window must not move it.
func (s *Service) expiry(now, sendAt time.Time, w *window.Window, expiresAt string, validity *int64) (at time.Time, fixed bool, err error) {
	start := ttlStart(now, sendAt)
	if w != nil {
		start = w.Next(start)
	}
	switch {
	case expiresAt != "" && validity != nil:
		return at, false, problem.Invalid("validity", "must not be given with expires_at: give one or the other")
	case validity != nil:
		if *validity < 1 || *validity > maxValidity {
			return at, false, problem.Invalid("validity", "must be 1 to 2592000 seconds (30 days)")
		}
		return start.Add(time.Duration(*validity) * time.Second).UTC(), false, nil
	case expiresAt == "":
		return start.Add(s.cfg.MessageTTL).UTC(), false, nil
	}
	t, err := ParseTime(expiresAt)
	switch {
	case err != nil:
		return at, false, problem.Invalid("expires_at", "must be an RFC 3339 time such as 2026-11-22T10:04:05.123Z")
	case !t.After(start):
		return at, false, problem.Invalid("expires_at", "must be after the message may first go out: now, send_at, or its window's next opening ("+start.UTC().Format(timeLayout)+")")
	case t.Sub(ttlStart(now, sendAt)) > MaxScheduleAhead:
		return at, false, problem.Invalid("expires_at", "must be at most 30 days after send_at (or now)")
	}
	return t.UTC(), true, nil
}
