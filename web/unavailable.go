package web

import "github.com/simrelay/simrelay/problem"

// storeProblem is the 503 of a store that cannot take the request now (its
// disk full, its database out of reach), in the API's words and logged as
// the API logs it (outage.Refusals): spaced, not one ERROR a request as an
// unknown failure is. False for any other error.
func (c *Console) storeProblem(err error) (*problem.Error, bool) {
	return c.refusals.Answer(err, c.deps.Now(), c.deps.Logger)
}
