package web

import (
	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/problem"
)

// storeProblem is the 503 of a store that cannot take the request now (its
// disk full, its database out of reach), in the API's words (outage), and
// logs it as the API does: at most one line per outage.LogEvery for each
// of the two, with the count left out since the line before (suppressed),
// not one ERROR a request as an unknown failure is. False for any other
// error.
func (c *Console) storeProblem(err error) (*problem.Error, bool) {
	kind, pe := outage.Of(err)
	spacer := &c.unavailable
	switch kind {
	case outage.None:
		return nil, false
	case outage.DiskFull:
		spacer = &c.diskFull
	}
	if suppressed, ok := spacer.Due(c.deps.Now(), outage.LogEvery); ok {
		c.deps.Logger.Error(kind.Line(), "err", err, "suppressed", suppressed)
	}
	return pe, true
}
