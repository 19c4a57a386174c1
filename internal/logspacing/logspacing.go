// Package logspacing spaces the log lines of a failure that every request
// meets while it lasts (the database out of reach, the shared rate-limit
// windows not answering): an outage under load meets thousands of requests
// a second, and a line each would bury everything else the node says.
package logspacing

import (
	"sync"
	"time"
)

// Spacer says when the next line of one failure is due. Its zero value is
// ready to use; it is safe for concurrent use.
type Spacer struct {
	mu sync.Mutex
	// at is when a line was last logged; zero before the first.
	at time.Time
	// unlogged counts the occurrences left out since that line.
	unlogged int
}

// Due reports whether a line is due at now, at most one per every, and how
// many occurrences went unlogged since the line before (its "suppressed").
func (s *Spacer) Due(now time.Time, every time.Duration) (suppressed int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && now.Sub(s.at) < every {
		s.unlogged++
		return 0, false
	}
	suppressed = s.unlogged
	s.at, s.unlogged = now, 0
	return suppressed, true
}
