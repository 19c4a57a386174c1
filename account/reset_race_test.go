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

func (s resetDuringLogin) StartRefreshFamily(hash []byte, t store.RefreshToken, now time.Time) error {
	if s.reset != nil {
		s.reset()
	}
	return s.Store.StartRefreshFamily(hash, t, now)
}

// Whoever knows the old password and logs in while the owner resets it
// gets nothing that outlives the reset: neither the login's access token
// nor its refresh token, which the reset's revocation came too early for.
func TestLoginRacingAResetKeepsNothing(t *testing.T) {
	t.Parallel()
	bolt, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	st := &resetDuringLogin{Store: bolt}
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil, slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const old, email = "Old password 1", "owner@acme.test"
	_, u, _, err := svc.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", Email: email, Password: old})
	if err != nil {
		t.Fatal(err)
	}
	// The owner's reset link, as ForgotPassword stores it (by its SHA-256).
	const link = "reset-link-token-of-the-owner-0123456789"
	h := sha256.Sum256([]byte(link))
	if err := bolt.PutOneTimeToken(h[:], store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st.reset = func() {
		st.reset = nil
		if err := svc.ResetPassword(ctx, link, "New password 2"); err != nil {
			t.Errorf("reset: %v", err)
		}
	}

	raced, err := svc.Login(ctx, email, old)
	if err != nil {
		t.Fatalf("the racing login: %v", err)
	}
	if st.reset != nil {
		t.Fatal("the reset did not run inside the login")
	}
	if _, err := svc.Authenticate(ctx, raced.AccessToken); !isUnauthorized(err) {
		t.Errorf("the racing login's access token: %v, want unauthorized", err)
	}
	if _, err := svc.Refresh(ctx, raced.RefreshToken); !isUnauthorized(err) {
		t.Errorf("the racing login's refresh token: %v, want unauthorized", err)
	}

	fresh, err := svc.Login(ctx, email, "New password 2")
	if err != nil {
		t.Fatal(err)
	}
	next, err := svc.Refresh(ctx, fresh.RefreshToken)
	if err != nil {
		t.Fatalf("a login after the reset: %v", err)
	}
	if _, err := svc.Authenticate(ctx, next.AccessToken); err != nil {
		t.Fatalf("a login after the reset, refreshed: %v", err)
	}
}

func isUnauthorized(err error) bool {
	pe, ok := problem.As(err)
	return ok && pe.Code == problem.Unauthorized
}
