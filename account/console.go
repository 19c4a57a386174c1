package account

import (
	"context"
	"errors"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Lifetimes of a web console session.
const (
	// DefaultConsoleIdle signs a browser out after half a day without a
	// request: a shared office computer left signed in overnight is not.
	DefaultConsoleIdle = 12 * time.Hour
	// DefaultConsoleLifetime ends every session a week after sign-in, however
	// busy, so a stolen cookie does not last for ever.
	DefaultConsoleLifetime = 7 * 24 * time.Hour
	// consoleTouchEvery bounds the writes that keep a session alive: one per
	// session a minute, not one per page view.
	consoleTouchEvery = time.Minute
)

// ConsoleSession is a signed-in browser as the console sees it.
type ConsoleSession struct {
	// ID goes into the cookie; the store keeps only its hash.
	ID        string
	CSRF      string
	Principal Principal
	// Device is a fresh device cookie's value for the browser
	// (devices.go), set by ConsoleSignIn only.
	Device string
}

var errConsoleSession = problem.New(problem.Unauthorized, "Your session has ended. Sign in again.")

// ConsoleSignIn checks an e-mail and password as Login does and opens a
// console session instead of handing out tokens.
func (s *Service) ConsoleSignIn(ctx context.Context, email, password string) (ConsoleSession, error) {
	u, device, err := s.checkLogin(ctx, email, password)
	if err != nil {
		return ConsoleSession{}, err
	}
	id, csrf := "cs_"+randomToken(32), randomToken(24)
	now := s.now()
	if err := s.store.PutConsoleSession(tokenHash(id), store.ConsoleSession{UserID: u.ID, CompanyID: u.CompanyID, CSRF: csrf,
		CreatedAt: now, SeenAt: now, ExpiresAt: now.Add(s.cfg.ConsoleLifetime), Generation: u.TokenGeneration}); err != nil {
		return ConsoleSession{}, signInGone(err)
	}
	return ConsoleSession{ID: id, CSRF: csrf, Principal: Principal{CompanyID: u.CompanyID, UserID: u.ID, Role: u.Role}, Device: device}, nil
}

// ConsoleAuthenticate resolves a session cookie. As with access tokens, the
// role comes from the store on every request, so a demotion or removal takes
// effect at once.
func (s *Service) ConsoleAuthenticate(_ context.Context, id string) (ConsoleSession, error) {
	return s.consoleSession(id, true)
}

// ConsoleCheck says whether a session still stands, as ConsoleAuthenticate
// does, without counting as a request: its idle clock is left as it is.
// An open live stream checks its session so (web's heartbeat), and a tab
// left open on an unattended computer is signed out after the idle time,
// as one on any other page is, not kept signed in by its own heartbeats.
func (s *Service) ConsoleCheck(_ context.Context, id string) (ConsoleSession, error) {
	return s.consoleSession(id, false)
}

// consoleSession resolves a session; touch counts it as a request, which
// restarts its idle clock.
func (s *Service) consoleSession(id string, touch bool) (ConsoleSession, error) {
	if id == "" {
		return ConsoleSession{}, errConsoleSession
	}
	hash := tokenHash(id)
	sess, err := s.store.ConsoleSession(hash)
	if errors.Is(err, store.ErrNotFound) {
		return ConsoleSession{}, errConsoleSession
	}
	if err != nil {
		return ConsoleSession{}, err
	}
	now := s.now()
	if !now.Before(sess.ExpiresAt) || now.Sub(sess.SeenAt) >= s.cfg.ConsoleIdle {
		if err := s.store.DeleteConsoleSession(hash); err != nil {
			return ConsoleSession{}, err
		}
		return ConsoleSession{}, errConsoleSession
	}
	u, err := s.store.User(sess.UserID)
	if errors.Is(err, store.ErrNotFound) || err == nil && (u.CompanyID != sess.CompanyID || u.TokenGeneration != sess.Generation) {
		// Gone, or signed in with a password a reset has replaced since.
		return ConsoleSession{}, errConsoleSession
	}
	if err != nil {
		return ConsoleSession{}, err
	}
	if touch && now.Sub(sess.SeenAt) >= consoleTouchEvery {
		// A store that cannot write now (its disk full) still reads: the
		// session stays good, and a later request refreshes its idle clock.
		// Refusing would turn every console page into a 503 while the
		// pages themselves only read.
		if err := s.store.TouchConsoleSession(hash, now); err != nil && !errors.Is(err, store.ErrUnavailable) {
			return ConsoleSession{}, err
		}
	}
	return ConsoleSession{ID: id, CSRF: sess.CSRF, Principal: Principal{CompanyID: u.CompanyID, UserID: u.ID, Role: u.Role}}, nil
}

// ConsoleSignOut ends one browser's session.
func (s *Service) ConsoleSignOut(_ context.Context, id string) error {
	if id == "" {
		return nil
	}
	return s.store.DeleteConsoleSession(tokenHash(id))
}

// PruneConsoleSessions drops the sessions that can no longer be used.
func (s *Service) PruneConsoleSessions() (int, error) {
	now := s.now()
	return s.store.PruneConsoleSessions(now.Add(-s.cfg.ConsoleIdle), now)
}
