package httpapi

import (
	"math"
	"time"

	"github.com/simrelay/simrelay/pacing"
)

// The API's rate limits, for the server's other listeners (the SMTP
// listener): a credential's sends and a client address's credential tries
// count in the same windows whichever door they came through, so a second
// door never doubles a limit.

// Limiter counts requests per key in fixed windows. On one node they are
// this process's memory (pacing.Windows); the nodes of a cluster share
// theirs through the database (postgres.Windows), so that a key or an
// address is counted once in the cluster, not once per node.
type Limiter interface {
	// Take counts one request of key (pacing.Windows.Take).
	Take(key string) (pacing.Result, error)
	// Spent reports, counting nothing, whether key's window has no request
	// left and how long until it ends (pacing.Windows.Spent).
	Spent(key string) (bool, time.Duration, error)
	// Sweep drops the windows that ended.
	Sweep() error
}

// Limiters makes the shared windows of a scope ("general", "members",
// "auth") at a rate (Deps.Limiters).
type Limiters func(scope string, rate pacing.Rate) (Limiter, error)

// memoryWindows are one node's windows, which cannot fail.
type memoryWindows struct{ w *pacing.Windows }

func (m memoryWindows) Take(key string) (pacing.Result, error) { return m.w.Take(key), nil }
func (m memoryWindows) Spent(key string) (bool, time.Duration, error) {
	spent, wait := m.w.Spent(key)
	return spent, wait, nil
}
func (m memoryWindows) Sweep() error { m.w.Sweep(); return nil }

// limiterLogEvery spaces the log lines of a failing limiter: with the
// database away every request fails to count, and one line says as much.
const limiterLogEvery = 10 * time.Second

// take counts a request of key in l. A limiter that fails (the database of
// a cluster does not answer) lets the request through with a full window:
// the route then meets the same database and answers for itself, whereas
// refusing every client with 429 would blame them for the server's fault.
func (s *Server) take(l Limiter, key string) pacing.Result {
	res, err := l.Take(key)
	if err != nil {
		s.limiterFailed(err)
		rate := s.cfg.GeneralRate
		if l == s.auth {
			rate = s.cfg.AuthRate
		}
		return pacing.Result{Limit: rate.Limit, Remaining: rate.Limit, Reset: rate.Window, Allowed: true}
	}
	return res
}

// limiterFailed logs a limiter's failure, at most once per limiterLogEvery.
func (s *Server) limiterFailed(err error) {
	now := time.Now().UnixNano()
	last := s.limiterLogged.Load()
	if now-last < int64(limiterLogEvery) || !s.limiterLogged.CompareAndSwap(last, now) {
		return
	}
	s.deps.Logger.Error("rate limits: a request was let through uncounted", "err", err)
}

// addressKey is a client address's key in the windows, as limit counts it.
func addressKey(ip string) string { return "ip:" + pacing.ClientKey(ip) }

// CountRequest counts one request of a credential's identity
// (account.Principal.Identity) in the general window, as a call to a
// counted route would.
func (s *Server) CountRequest(identity string) pacing.Result { return s.take(s.members, identity) }

// CredentialsSpent reports whether the client address has no credential
// try left in the auth scope's window (--rate-auth), and until when; it
// counts nothing. A limiter that fails answers "not spent", as take does.
func (s *Server) CredentialsSpent(ip string) (bool, time.Duration) {
	spent, wait, err := s.auth.Spent(addressKey(ip))
	if err != nil {
		s.limiterFailed(err)
		return false, 0
	}
	return spent, wait
}

// CountCredentialFailure counts a failed credential try of the client
// address in the auth scope's window.
func (s *Server) CountCredentialFailure(ip string) pacing.Result {
	return s.take(s.auth, addressKey(ip))
}

// newLimiters builds the three scopes' windows: in memory, or through
// deps.Limiters when the server is one node of a cluster.
func (s *Server) newLimiters() error {
	if s.deps.Limiters == nil {
		s.general = memoryWindows{pacing.NewCapped(s.cfg.GeneralRate, s.deps.Now, s.cfg.MaxAddresses)}
		s.members = memoryWindows{pacing.NewCapped(s.cfg.GeneralRate, s.deps.Now, math.MaxInt32)}
		s.auth = memoryWindows{pacing.NewCapped(s.cfg.AuthRate, s.deps.Now, s.cfg.MaxAddresses)}
		return nil
	}
	var err error
	if s.general, err = s.deps.Limiters("general", s.cfg.GeneralRate); err != nil {
		return err
	}
	if s.members, err = s.deps.Limiters("members", s.cfg.GeneralRate); err != nil {
		return err
	}
	s.auth, err = s.deps.Limiters("auth", s.cfg.AuthRate)
	return err
}
