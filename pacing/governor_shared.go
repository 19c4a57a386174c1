package pacing

import "time"

// Check is the governor's cap check for a number whose sends other
// processes make too (the nodes of a cluster on one database): it counts
// the number's windows afresh from history, the sends the store holds, and
// answers how long until one more send fits the caps, 0 when it fits now.
// It keeps nothing between calls, so no node's memory can disagree with
// another's. The caller runs it under a lock that serialises the number's
// sends in the store (its row lock) and stores the send in the same
// transaction, which is what makes the count exact; a refused or undone
// send leaves nothing to give back.
//
// The answers are Reserve's for a governor that had never seen the number:
// the same windows (a minute in seconds, an hour in minutes, a day in
// quarters of an hour) and the same waits.
func Check(caps Caps, now time.Time, history History) (retry time.Duration) {
	var s numberState
	s.advanceAll(now)
	if history != nil {
		s.addHistory(history(now.Add(-dayBuckets*dayRes)), now)
	}
	return max(
		wait(s.min[:], &s.rMin, minuteRes, caps.PerMinute, now),
		wait(s.hour[:], &s.rHour, hourRes, caps.PerHour, now),
		wait(s.day[:], &s.rDay, dayRes, caps.PerDay, now),
	)
}
