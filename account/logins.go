package account

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Failed logins are bounded per e-mail address as well as per client
// address (the API's --rate-auth): addresses are cheap (an IPv6 /48 holds
// 65,536 clients of the limits), so without it guesses at one account's
// password from many addresses had no bound. It throttles rather than
// locks: the count lives in a fixed window that starts at the first
// failure and ends LoginRate's window later, whatever happens meanwhile,
// so nobody can lock an account for longer than one window at a time.

// The scopes of the failed logins' windows among the windows a cluster
// shares (postgres.Windows): an e-mail address's failures (at LoginRate),
// a client's share of them (ClientShareRate) and a device cookie's own
// (DeviceRate).
const (
	LoginScope       = "login"
	ClientShareScope = "login-client"
	DeviceScope      = "login-device"
)

// DefaultLoginRate is how many failed logins one e-mail address may have
// in a window: 10 in 15 minutes, in the range OWASP's authentication cheat
// sheet gives for throttling, a third under the 15 a client address gets
// (--rate-auth), so that a person who mistyped a few times and a password
// manager that retried are not refused, while a guesser gets at most 960
// tries a day at an account however many addresses it has.
var DefaultLoginRate = pacing.Rate{Limit: 10, Window: 15 * time.Minute}

// LoginWindows are windows every node of a cluster counts in
// (postgres.Windows at the rate of their count).
type LoginWindows interface {
	Take(key string) (pacing.Result, error)
	// Refund takes back a request Take counted, from the window that
	// counted it (end: its Result's End) and no later one.
	Refund(key string, end time.Time) error
}

// SharedLogins are the windows a cluster counts the failed logins in: an
// e-mail address's (scope LoginScope, at LoginRate), a client's share of
// one (ClientShareScope, ClientShareRate) and a device cookie's
// (DeviceScope, DeviceRate). Their keys are keyed digests (loginKey,
// windowKey): no address, client or cookie is written in clear.
type SharedLogins struct {
	Addresses, Clients, Devices LoginWindows
}

// ShareFailedLogins has the failed logins counted in w, so that an e-mail
// address gets LoginRate's failures, a client its share of them and a
// device cookie DeviceFailures from the whole cluster, not that many from
// each node; call it before serving. On one node nothing calls it and the
// counts stay in the process's memory.
func (s *Service) ShareFailedLogins(w SharedLogins) {
	s.failedLogins.shared = w.Addresses
	s.clientShares.shared = w.Clients
	s.deviceFailures.shared = w.Devices
}

// LoginRate is the rate of an e-mail address's failed logins' windows
// (Config.LoginRate), ClientShareRate that of a client's share of them,
// DeviceRate that of a device cookie's: every node of a cluster must
// count the shared windows at them.
func (s *Service) LoginRate() pacing.Rate { return s.cfg.LoginRate }

// ClientShareRate is the rate of a client's share of an address's failed
// logins (LoginRate).
func (s *Service) ClientShareRate() pacing.Rate { return clientShareRate(s.cfg.LoginRate) }

// DeviceRate is the rate of a device cookie's failed logins (LoginRate).
func (s *Service) DeviceRate() pacing.Rate { return deviceRate(s.cfg.LoginRate) }

// loginKey is the key of an e-mail address in the failed logins' windows,
// its keyed digest (loginDigest) in text, for an address the login's check
// has read (trimmed, one address). It
// folds the address's case as both stores do to find its user
// (store.EmailKey), so that ANA@ and ana@, one account, are one count, not a
// fresh allowance per spelling. It is a keyed digest, so that the windows
// hold 22 bytes a key whatever the address's length, and neither a node's
// memory nor the cluster's table of windows holds the addresses people
// typed (a wrong one may be a password typed into the wrong field); the
// key is the store's secret, the same on every node of a cluster.
func loginKey(digest []byte) string {
	return base64.RawURLEncoding.EncodeToString(digest)
}

// loginDigestSize is the length of an address's keyed digest.
const loginDigestSize = 16

// loginDigest is the keyed digest of loginKey, as bytes: a device cookie
// names its account by it (devices.go).
func (s *Service) loginDigest(email string) []byte {
	m := hmac.New(sha256.New, s.loginSecret)
	m.Write([]byte(store.EmailKey(email)))
	return m.Sum(nil)[:loginDigestSize]
}

// windowKey is the key, in a failed logins' window, of what kind names
// (a client's share of an address, a device cookie) by parts: a keyed
// digest under loginSecret, as loginKey, so that a key is 22 bytes
// whatever it names and neither a node's memory nor the cluster's table of
// windows holds a client address or a cookie.
func (s *Service) windowKey(kind string, parts ...[]byte) string {
	m := hmac.New(sha256.New, s.loginSecret)
	m.Write([]byte(kind))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write(p)
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:loginDigestSize])
}

// loginCount is one count of failed logins: an e-mail address's, a
// client's share or a device cookie's (name says which, for the log).
type loginCount struct {
	name string
	// local counts in this process: on one node, and on a node of a
	// cluster while shared does not answer.
	local *pacing.Windows
	// shared counts for the whole cluster (ShareFailedLogins); nil on one
	// node.
	shared LoginWindows
}

// take counts a login try of key in c before its password is checked, and
// says whether it may be checked; refund takes the try back, for one that
// proved not to be a failure. Counting first means tries sent at once
// cannot all pass while the first are hashing. While the shared windows
// do not answer, the node counts in its own memory, as one node does
// (pacing.Shared): a login is never refused for the server's fault, and an
// outage lets a key have at most its count's limit more from each node.
func (s *Service) take(c loginCount, key string) (res pacing.Result, refund func()) {
	return pacing.TakeRefundable(pacing.Shared[LoginWindows]{Local: c.local, Cluster: c.shared, Failed: func(err error) {
		s.sharedLoginsFailed(c.name, "counted in this node's memory", err)
	}}, key, func(err error) {
		s.sharedLoginsFailed(c.name, "a right login stays counted as a failure until its window ends", err)
	})
}

// takeLogin counts a login try of the e-mail address's key (take).
func (s *Service) takeLogin(key string) (res pacing.Result, refund func()) {
	return s.take(s.failedLogins, key)
}

// One client's share. A client address (an IPv6 /64) counts at most
// ClientShare failures toward an e-mail address's LoginRate in a window;
// past its share its own tries of that address are refused (429, as over
// the address's limit) and count no more. So a script that retries a stale
// password, or one guesser, cannot spend an account's failures alone and
// keep its owner out: that takes failures from LoginRate.Limit/ClientShare
// + 1 clients (4 by default). In a cluster the shares are counted for the
// whole cluster (ShareFailedLogins): a client spread over N nodes still
// has one.

// ClientShare is how many of an e-mail address's failed logins in a window
// one client address may count (at most LoginRate's limit).
const ClientShare = 3

// clientShareRate is the window of one client's share of an address's
// failed logins: ClientShare in the address's window.
func clientShareRate(r pacing.Rate) pacing.Rate {
	return pacing.Rate{Limit: min(ClientShare, r.Limit), Window: r.Window}
}

type clientKeyCtx struct{}

// WithClient is ctx carrying the client's address as the rate limits key
// it (pacing.ClientKey: an IPv6 client is its /64), for the failed logins'
// shares (Login, ConsoleSignIn). Without it a login counts toward the
// address's limit only.
func WithClient(ctx context.Context, ip string) context.Context {
	return context.WithValue(ctx, clientKeyCtx{}, pacing.ClientKey(ip))
}

// takeShare counts a login try of the e-mail address's key by ctx's
// client in its share, and says whether it may go on; refund takes it
// back. A context with no client goes on, counting nothing.
func (s *Service) takeShare(ctx context.Context, key string) (res pacing.Result, refund func()) {
	client, _ := ctx.Value(clientKeyCtx{}).(string)
	if client == "" {
		return pacing.Result{Allowed: true}, func() {}
	}
	return s.take(s.clientShares, s.windowKey("client", []byte(key), []byte(client)))
}

// loginsLogEvery spaces the log lines of a failing shared count: with the
// database away every login fails to count, and one line says as much.
const loginsLogEvery = 10 * time.Second

// sharedLoginsFailed logs the failure of a shared count (count names it),
// at most once per loginsLogEvery for all of them; each line counts the
// failures left out since the one before.
func (s *Service) sharedLoginsFailed(count, what string, err error) {
	if suppressed, ok := s.loginsLog.Due(s.now(), loginsLogEvery); ok {
		s.log.Warn("failed logins: the shared count does not answer; "+what, "count", count, "err", err, "suppressed", suppressed)
	}
}

// errLoginsSpent refuses a login of an e-mail address that had its failed
// logins of the window, without checking the password: a right one is
// refused too, or the answer would still tell a guess right from wrong. It
// is the same for an address with no account.
func (s *Service) errLoginsSpent(res pacing.Result) error {
	return s.errSpent(res, s.cfg.LoginRate, "")
}

// errShareSpent refuses, the same way, a login of an e-mail address by a
// client that had its share of the address's failed logins (ClientShare).
func (s *Service) errShareSpent(res pacing.Result) error {
	return s.errSpent(res, clientShareRate(s.cfg.LoginRate), " from this network")
}

// errSpent is the 429 of a login over rate (res its count), whose failures
// came from where says.
func (s *Service) errSpent(res pacing.Result, rate pacing.Rate, where string) error {
	secs := res.ResetSeconds()
	return &problem.Error{Code: problem.RateLimited, RetryAfter: secs,
		Message: fmt.Sprintf("Too many failed logins for this e-mail address%s: the limit is %d in %s. Retry after %s.",
			where, rate.Limit, problem.InWords(rate.Window), problem.Count(secs, "second"))}
}
