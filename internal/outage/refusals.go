package outage

import (
	"log/slog"
	"time"

	"github.com/simrelay/simrelay/internal/logspacing"
	"github.com/simrelay/simrelay/problem"
)

// Refusals answers and logs the requests a store refused, for one server
// (the API, the console): at most one line per LogEvery for each Kind,
// spaced each on its own so that neither's line hides the other's, each
// line counting the requests left out since the one before (suppressed).
// Its zero value is ready to use; it is safe for concurrent use.
type Refusals struct {
	unreachable, diskFull logspacing.Spacer
}

// Answer is the client's 503 for err (Of), logged on log when a line is
// due at now; false, and nothing logged, for any other error.
func (r *Refusals) Answer(err error, now time.Time, log *slog.Logger) (*problem.Error, bool) {
	kind, pe := Of(err)
	spacer := &r.unreachable
	switch kind {
	case None:
		return nil, false
	case DiskFull:
		spacer = &r.diskFull
	}
	if suppressed, ok := spacer.Due(now, LogEvery); ok {
		log.Error(kind.Line(), "err", err, "suppressed", suppressed)
	}
	return pe, true
}
