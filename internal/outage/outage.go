// Package outage is the one answer to a request the store cannot take now:
// its disk is full (store.ErrDiskFull) or its database is out of reach or
// out of a resource (store.ErrUnavailable). Either is a state of the
// server, not a fault of the request, so it is a 503 with Retry-After, and
// the API (httpapi) and the console (web) answer it in the same words and
// log it under the same line, each with its own spacing (logspacing).
package outage

import (
	"errors"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// LogEvery spaces the log lines of requests refused for one outage: under
// load it meets every request, and a line each would bury the rest of the
// log. /readyz (and the embedded store) log its start and end; these lines
// say requests are refused.
const LogEvery = 10 * time.Second

// RetryAfter is the 503's Retry-After in seconds: long enough not to
// hammer the database, short enough for a restart or failover.
const RetryAfter = 5

// Kind tells the two outages apart: they ask the operator for different
// things, so each is logged under its own line, spaced on its own, and
// neither's line may hide the other's.
type Kind int

const (
	None        Kind = iota
	DiskFull         // store.ErrDiskFull
	Unreachable      // store.ErrUnavailable, a full disk aside
)

// Line is the log line of the requests refused for k.
func (k Kind) Line() string {
	if k == DiskFull {
		return "store disk full: writes refused"
	}
	return "store unavailable"
}

// Of is the outage err stands for, and the client's 503 for it; None and
// nil for any other error.
func Of(err error) (Kind, *problem.Error) {
	switch {
	case errors.Is(err, store.ErrDiskFull): // before ErrUnavailable, which it wraps
		return DiskFull, &problem.Error{Code: problem.Unavailable, RetryAfter: RetryAfter,
			Message: "The server's disk is full, so it cannot store anything now; nothing was done. Try again shortly."}
	case errors.Is(err, store.ErrUnavailable):
		return Unreachable, &problem.Error{Code: problem.Unavailable, RetryAfter: RetryAfter,
			Message: "The server cannot reach its database; nothing was done. Try again shortly."}
	}
	return None, nil
}
