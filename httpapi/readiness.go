package httpapi

import (
	"sync"
	"time"
)

// readinessRemindEvery spaces the reminders that the server is still not
// ready. A balancer asks /readyz every second or so; logging each failed
// check made an hour's outage 3,600 identical lines per node, which bury
// everything else the node says meanwhile.
const readinessRemindEvery = time.Minute

// readiness is what /readyz last found, so that an outage of the store or
// the bus is logged as a change of state: one line when readiness is lost
// (and when its cause changes), a reminder at most every
// readinessRemindEvery while it stays lost, one line when it is back.
// Drain's 503 is no outage and is not tracked.
type readiness struct {
	mu sync.Mutex
	// since is when readiness was lost; zero while ready.
	since time.Time
	// cause is what was not ready: "store" or "bus".
	cause string
	// remind is when the next reminder is due.
	remind time.Time
}

// readinessLost records a failed check of cause and logs it if it is news:
// the first failure, another cause, or a reminder that came due.
func (s *Server) readinessLost(cause string, err error) {
	now := s.deps.Now()
	r := &s.readiness
	r.mu.Lock()
	news := r.since.IsZero() || r.cause != cause || !now.Before(r.remind)
	if r.since.IsZero() {
		r.since = now
	}
	r.cause = cause
	if news {
		r.remind = now.Add(readinessRemindEvery)
	}
	since := r.since
	r.mu.Unlock()
	// Logged at ERROR, as each failed check was before: an operator's alert
	// on this line still fires, once an outage, not once a probe.
	if news {
		s.deps.Logger.Error("readiness check failed", "cause", cause, "not_ready_for", now.Sub(since).Round(time.Second), "err", err)
	}
}

// readinessOK records a check that found the server ready, and logs the end
// of an outage with how long it lasted.
func (s *Server) readinessOK() {
	now := s.deps.Now()
	r := &s.readiness
	r.mu.Lock()
	since := r.since
	r.since, r.cause = time.Time{}, ""
	r.mu.Unlock()
	if !since.IsZero() {
		s.deps.Logger.Info("ready again", "not_ready_for", now.Sub(since).Round(time.Second))
	}
}
