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

// scopeWindows are a scope's windows as the server counts in them: this
// node's memory, and on a node of a cluster the shared windows
// (postgres.Windows) before it (pacing.Shared). They cannot fail: while the
// database does not answer, a request counts in the node's memory instead,
// as on one node: its RateLimit-* headers tell that count (every counted
// response carries them, contract section 4), a client over the limit on
// this node is refused with 429 as it would be anywhere, and nobody is
// refused for the server's fault. The price of an outage is that a client
// may spend one window on each node (and the local figures start afresh);
// the shared windows count again from the database's answer on. The memory
// windows of a node of a cluster hold only what an outage counted, and are
// swept with the shared ones.
type scopeWindows struct{ pacing.Shared[Limiter] }

func (w scopeWindows) Take(key string) pacing.Result {
	res, _ := w.Shared.Take(key)
	return res
}

func (w scopeWindows) Spent(key string) (bool, time.Duration) {
	if w.Clustered() {
		spent, wait, err := w.Cluster.Spent(key)
		if err == nil {
			return spent, wait
		}
		w.Fail(err)
	}
	return w.Local.Spent(key)
}

func (w scopeWindows) Sweep() error {
	w.Local.Sweep()
	if !w.Clustered() {
		return nil
	}
	return w.Cluster.Sweep()
}

// limiterLogEvery spaces the log lines of a failing limiter (logspacing):
// with the database away every request fails to count, and one line says
// as much.
const limiterLogEvery = 10 * time.Second

// limiterFailed logs a limiter's failure, at most once per limiterLogEvery;
// each line counts the failures left out since the one before.
func (s *Server) limiterFailed(err error) {
	if suppressed, ok := s.limiterLog.Due(s.deps.Now(), limiterLogEvery); ok {
		s.deps.Logger.Error("rate limits: the shared windows do not answer; requests count in this node's memory meanwhile", "err", err, "suppressed", suppressed)
	}
}

// addressKey is a client address's key in the windows, as limit counts it.
func addressKey(ip string) string { return "ip:" + pacing.ClientKey(ip) }

// CountRequest counts one request of a credential's identity
// (account.Principal.Identity) in the general window, as a call to a
// counted route would.
func (s *Server) CountRequest(identity string) pacing.Result { return s.members.Take(identity) }

// CredentialsSpent reports whether the client address has no credential
// try left in the auth scope's window (--rate-auth), and until when; it
// counts nothing.
func (s *Server) CredentialsSpent(ip string) (bool, time.Duration) {
	return s.auth.Spent(addressKey(ip))
}

// CountCredentialFailure counts a failed credential try of the client
// address in the auth scope's window.
func (s *Server) CountCredentialFailure(ip string) pacing.Result {
	return s.auth.Take(addressKey(ip))
}

// newLimiters builds the three scopes' windows: in memory, and through
// deps.Limiters as well when the server is one node of a cluster; and the
// preflights' windows, in memory on every node.
func (s *Server) newLimiters() error {
	s.preflight = scopeWindows{pacing.Shared[Limiter]{Local: pacing.NewCapped(s.cfg.GeneralRate, s.deps.Now, s.cfg.MaxAddresses)}}
	windows := func(scope string, rate pacing.Rate, addresses int) (scopeWindows, error) {
		w := scopeWindows{pacing.Shared[Limiter]{Local: pacing.NewCapped(rate, s.deps.Now, addresses), Failed: s.limiterFailed}}
		if s.deps.Limiters != nil {
			l, err := s.deps.Limiters(scope, rate)
			if err != nil {
				return scopeWindows{}, err
			}
			w.Cluster = l
		}
		return w, nil
	}
	var err error
	if s.general, err = windows("general", s.cfg.GeneralRate, s.cfg.MaxAddresses); err != nil {
		return err
	}
	if s.members, err = windows("members", s.cfg.GeneralRate, math.MaxInt32); err != nil {
		return err
	}
	s.auth, err = windows("auth", s.cfg.AuthRate, s.cfg.MaxAddresses)
	return err
}
