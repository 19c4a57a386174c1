package account_test

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

// resetDuringLogin is the real store with one interleaving forced: the
// reset link is spent after a login checked the old password and before it
// starts its refresh family.
type resetDuringLogin struct {
	*boltstore.Store
	reset func()
}

func (s resetDuringLogin) PutConsoleSession(hash []byte, sess store.ConsoleSession) error {
	if s.reset != nil {
		s.reset()
	}
	return s.Store.PutConsoleSession(hash, sess)
}

func (s resetDuringLogin) StartRefreshFamily(hash []byte, t store.RefreshToken, now time.Time) error {
	if s.reset != nil {
		s.reset()
	}
	return s.Store.StartRefreshFamily(hash, t, now)
}

// raceFixture is an account service on a real store whose owner's reset
// link is spent inside the next sign-in (login or console).
type raceFixture struct {
	svc *account.Service
	st  *resetDuringLogin
}

const raceEmail, raceOld, raceNew = "owner@acme.test", "Old password 1", "New password 2"

func newRaceFixture(t *testing.T) raceFixture {
	t.Helper()
	bolt := openStore(t)
	st := &resetDuringLogin{Store: bolt}
	svc, u, clk := raceAccount(t, st)
	// The owner's reset link, stored as ForgotPassword stores one (by its SHA-256).
	const link = "reset-link-token-of-the-owner-0123456789"
	h := sha256.Sum256([]byte(link))
	if err := bolt.PutOneTimeToken(h[:], store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st.reset = func() {
		st.reset = nil
		if err := svc.ResetPassword(context.Background(), link, raceNew); err != nil {
			t.Errorf("reset: %v", err)
		}
	}
	return raceFixture{svc: svc, st: st}
}

// raceAccount is an account service on st (the real store with one
// interleaving forced), its clock, and the owner of its one company.
func raceAccount(t *testing.T, st account.Store) (*account.Service, store.User, *testclock.Clock) {
	t.Helper()
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil, slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	_, u, _, err := svc.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", Email: raceEmail, Password: raceOld})
	if err != nil {
		t.Fatal(err)
	}
	return svc, u, clk
}

// Whoever knows the old password and logs in while the owner resets it
// gets nothing that outlives the reset: neither the login's access token
// nor its refresh token, which the reset's revocation came too early for.
func TestLoginRacingAResetKeepsNothing(t *testing.T) {
	t.Parallel()
	f, ctx := newRaceFixture(t), context.Background()
	raced, err := f.svc.Login(ctx, raceEmail, raceOld)
	if err != nil {
		t.Fatalf("the racing login: %v", err)
	}
	if f.st.reset != nil {
		t.Fatal("the reset did not run inside the login")
	}
	if _, err := f.svc.Authenticate(ctx, raced.AccessToken); !isUnauthorized(err) {
		t.Errorf("the racing login's access token: %v, want unauthorized", err)
	}
	if _, err := f.svc.Refresh(ctx, raced.RefreshToken); !isUnauthorized(err) {
		t.Errorf("the racing login's refresh token: %v, want unauthorized", err)
	}

	fresh, err := f.svc.Login(ctx, raceEmail, raceNew)
	if err != nil {
		t.Fatal(err)
	}
	next, err := f.svc.Refresh(ctx, fresh.RefreshToken)
	if err != nil {
		t.Fatalf("a login after the reset: %v", err)
	}
	if _, err := f.svc.Authenticate(ctx, next.AccessToken); err != nil {
		t.Fatalf("a login after the reset, refreshed: %v", err)
	}
}

// The same race in the console: the session of a sign-in that checked the
// old password is refused, one signed in after the reset works.
func TestConsoleSignInRacingAResetKeepsNothing(t *testing.T) {
	t.Parallel()
	f, ctx := newRaceFixture(t), context.Background()
	raced, err := f.svc.ConsoleSignIn(ctx, raceEmail, raceOld)
	if err != nil {
		t.Fatalf("the racing sign-in: %v", err)
	}
	if f.st.reset != nil {
		t.Fatal("the reset did not run inside the sign-in")
	}
	if _, err := f.svc.ConsoleAuthenticate(ctx, raced.ID); !isUnauthorized(err) {
		t.Errorf("the racing sign-in's session: %v, want unauthorized", err)
	}
	fresh, err := f.svc.ConsoleSignIn(ctx, raceEmail, raceNew)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.ConsoleAuthenticate(ctx, fresh.ID); err != nil {
		t.Fatalf("a sign-in after the reset: %v", err)
	}
}

func isUnauthorized(err error) bool {
	pe, ok := problem.As(err)
	return ok && pe.Code == problem.Unauthorized
}
