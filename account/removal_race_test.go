package account_test

import (
	"context"
	"errors"
	"testing"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/conformance"
)

// A sign-in (login or console) that checked the password of a user whose
// company is removed before it stores its session is answered as a wrong
// password (401 invalid_credentials), as a login of an unknown address
// is, not as a server error, and stores nothing.
func TestSignInRacingACompanyRemoval(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"login", "console"} {
		bolt := openStore(t)
		st := &resetDuringLogin{Store: bolt}
		svc, u, _ := raceAccount(t, st)
		st.reset = func() {
			st.reset = nil
			conformance.RemoveCompany(t, bolt, u.CompanyID, 1000)
		}
		ctx := context.Background()
		var err error
		if how == "login" {
			_, err = svc.Login(ctx, raceEmail, raceOld)
		} else {
			_, err = svc.ConsoleSignIn(ctx, raceEmail, raceOld)
		}
		if st.reset != nil {
			t.Fatalf("%s: the removal did not run inside the sign-in", how)
		}
		if pe, ok := problem.As(err); !ok || pe.Code != problem.InvalidLogin {
			t.Errorf("%s: a sign-in racing its company's removal: %v, want invalid_credentials", how, err)
		}
		if _, err := bolt.User(u.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: the removed user: %v", how, err)
		}
	}
}

// removalBeforeLink is the real store with one interleaving forced: the
// company is removed after a reset asked for its user's address found the
// user and before the link is stored.
type removalBeforeLink struct {
	*boltstore.Store
	remove func()
}

func (s removalBeforeLink) PutOneTimeToken(hash []byte, t store.OneTimeToken) error {
	if s.remove != nil {
		s.remove()
	}
	return s.Store.PutOneTimeToken(hash, t)
}

// A reset asked for the address of a user whose company is removed
// meanwhile is answered as one for an unknown address (no error: the
// answer tells no address from another), its link not stored.
func TestResetRacingACompanyRemoval(t *testing.T) {
	t.Parallel()
	bolt := openStore(t)
	st := &removalBeforeLink{Store: bolt}
	svc, u, _ := raceAccount(t, st)
	st.remove = func() {
		st.remove = nil
		conformance.RemoveCompany(t, bolt, u.CompanyID, 1000)
	}
	if err := svc.ForgotPassword(context.Background(), raceEmail); err != nil {
		t.Errorf("a reset racing its company's removal: %v, want none, as for an unknown address", err)
	}
	if st.remove != nil {
		t.Fatal("the removal did not run inside the reset")
	}
}
