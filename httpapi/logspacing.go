package httpapi

import (
	"sync"
	"time"
)

// spacedLog spaces the log lines of a failure that every request meets
// while it lasts (the database out of reach, the shared rate-limit windows
// not answering): an outage under load meets thousands of requests a
// second, and a line each would bury everything else the node says.
type spacedLog struct {
	mu sync.Mutex
	// at is when a line was last logged; zero before the first.
	at time.Time
	// unlogged counts the occurrences left out since that line.
	unlogged int
}

// due reports whether a line is due at now, at most one per every, and how
// many occurrences went unlogged since the line before (its "suppressed").
func (l *spacedLog) due(now time.Time, every time.Duration) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && now.Sub(l.at) < every {
		l.unlogged++
		return 0, false
	}
	suppressed = l.unlogged
	l.at, l.unlogged = now, 0
	return suppressed, true
}
