// Package outage is the one answer to a request the store cannot take now:
// its disk is full (store.ErrDiskFull), the embedded store's data file is
// gone (store.ErrDataFile), or its database is out of reach or out of a
// resource (store.ErrUnavailable). Each is a state of the
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
	Unreachable      // store.ErrUnavailable (store.ErrDataFile included), a full disk aside
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
	what, later := Reason(err)
	if what == "" {
		return None, nil
	}
	kind, when := Unreachable, "shortly"
	if errors.Is(err, store.ErrDiskFull) {
		kind = DiskFull
	}
	if later {
		when = "later"
	}
	return kind, &problem.Error{Code: problem.Unavailable, RetryAfter: RetryAfter,
		Message: what + "; nothing was done. Try again " + when + "."}
}

// Reason is what the client of a request refused for err is told happened,
// in the words of the store it happened to, and whether it lasts until the
// operator acts (later) rather than ending of itself within seconds or
// minutes; "" for an error that is no outage. The API, the console and the
// phones' upgrades say it alike.
func Reason(err error) (what string, later bool) {
	switch {
	case errors.Is(err, store.ErrDiskFull): // before ErrUnavailable, which it wraps
		return "The server's disk is full, so it cannot store anything now", false
	case errors.Is(err, store.ErrDataFile): // the embedded store's file, which has no database to reach
		return "The server's data file was deleted or replaced while it ran, or cannot be checked, so it cannot store anything until its operator restores the file", true
	case errors.Is(err, store.ErrUnavailable):
		return "The server cannot reach its database", false
	}
	return "", false
}
