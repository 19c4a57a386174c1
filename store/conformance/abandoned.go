package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Signup stores a company as a sign-up does, created at created: its API
// key made with it, its owner an unverified admin with a password, and the
// owner's verification link, which expires a day later. It returns the
// company, the owner and the link's token hash.
func Signup(t testing.TB, st AccountsStore, email string, created time.Time) (store.Company, store.User, []byte) {
	t.Helper()
	n := unique()
	c := store.Company{Name: fmt.Sprintf("Signed-up %d", n), APIKeyHash: []byte(fmt.Sprintf("signup-key-%d", n)),
		APIKeySealed: []byte("sealed"), CreatedAt: created, APIKeyCreatedAt: created}
	u := store.User{FirstName: "Ana", LastName: "Lima", Email: email, PasswordHash: "set", CreatedAt: created}
	if err := st.CreateCompany(&c, &u); err != nil {
		t.Fatalf("sign-up of %s: %v", email, err)
	}
	h := []byte(fmt.Sprintf("verify-%d", n))
	if err := st.PutOneTimeToken(h, store.OneTimeToken{Kind: "verify", UserID: u.ID, ExpiresAt: created.Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return c, u, h
}

// pruneAllSignups runs PruneAbandonedSignups over every company, limit
// companies a transaction, as the server's prune does.
func pruneAllSignups(t testing.TB, s AccountsStore, cutoff, now time.Time, limit int) int {
	t.Helper()
	total, calls := 0, 0
	for after := uint64(0); ; calls++ {
		n, last, err := s.PruneAbandonedSignups(cutoff, now, after, limit)
		if err != nil {
			t.Fatalf("PruneAbandonedSignups: %v", err)
		}
		total += n
		if last == 0 {
			return total
		}
		if last <= after || calls > 10000 {
			t.Fatalf("PruneAbandonedSignups went from %d to %d", after, last)
		}
		after = last
	}
}

// accountsAbandonedSignups: a sign-up whose owner never verified the
// address, created before the cutoff, with nothing else under it, is
// removed with its owner, API key and tokens, and the address signs up
// again under new ids; a verified one, one with a second user, one with a
// pending invitation, a young one, one whose owner holds a live link, one
// with a device and one whose key was rotated all stay, as do companies
// that an operator made.
func accountsAbandonedSignups(t *testing.T, s AccountsStore) {
	now := T0.Add(30 * 24 * time.Hour)
	cutoff := now.Add(-8 * 24 * time.Hour)
	old := cutoff.Add(-time.Hour)
	mail := func(what string) string { return fmt.Sprintf("%s-%d@example.com", what, unique()) }

	gone, goneOwner, goneToken := Signup(t, s, mail("abandoned"), old)
	gone2, goneOwner2, _ := Signup(t, s, mail("abandoned2"), T0)

	verified, vOwner, vToken := Signup(t, s, mail("verified"), old)
	if _, err := s.ConsumeOneTimeToken(vToken, []string{"verify"}, old.Add(time.Hour), false, func(u *store.User) error {
		u.EmailVerified = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	two, _, _ := Signup(t, s, mail("two"), old)
	member := accountUser(two.ID, store.RoleMember, true)
	if err := s.CreateUser(&member); err != nil {
		t.Fatal(err)
	}
	invited, _, _ := Signup(t, s, mail("invited"), old)
	invitee := accountUser(invited.ID, store.RoleMember, false)
	if _, err := s.InviteUser(&invitee, old); err != nil {
		t.Fatal(err)
	}
	young, _, _ := Signup(t, s, mail("young"), cutoff.Add(time.Hour))
	resetting, rOwner, _ := Signup(t, s, mail("resetting"), old)
	if err := s.PutOneTimeToken([]byte(fmt.Sprintf("reset-%d", unique())), store.OneTimeToken{Kind: "reset", UserID: rOwner.ID, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	paired, _, _ := Signup(t, s, mail("paired"), old)
	Device(t, s, paired.ID, fmt.Sprintf("fp-abandoned-%d", unique()))
	rotated, _, _ := Signup(t, s, mail("rotated"), old)
	if _, err := s.UpdateCompany(rotated.ID, func(c *store.Company) error {
		c.APIKeyHash, c.APIKeyCreatedAt = []byte(fmt.Sprintf("rotated-%d", unique())), old.Add(time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	operator, _ := Company(t, s) // admin create-company's: verified; here its key has no time of its own

	if n := pruneAllSignups(t, s, cutoff, now, 2); n != 2 {
		t.Fatalf("removed %d sign-ups, want 2", n)
	}
	for _, c := range []store.Company{gone, gone2} {
		if _, err := s.Company(c.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("abandoned company %d: %v, want ErrNotFound", c.ID, err)
		}
		if _, err := s.CompanyByAPIKeyHash(c.APIKeyHash); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("abandoned company %d's key: %v, want ErrNotFound", c.ID, err)
		}
		if users, err := s.CompanyUsers(c.ID); err != nil || len(users) != 0 {
			t.Fatalf("abandoned company %d's users: %+v (%v), want none", c.ID, users, err)
		}
	}
	for _, u := range []store.User{goneOwner, goneOwner2} {
		if _, err := s.User(u.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("abandoned owner %d: %v, want ErrNotFound", u.ID, err)
		}
		if _, err := s.UserByEmail(u.Email); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("abandoned owner's address %s: %v, want ErrNotFound", u.Email, err)
		}
	}
	if _, err := s.ConsumeOneTimeToken(goneToken, []string{"verify"}, T0, false, func(*store.User) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the removed owner's link: %v, want ErrNotFound", err)
	}
	for what, c := range map[string]store.Company{"verified": verified, "two users": two, "invitation": invited, "young": young,
		"live link": resetting, "device": paired, "key rotated": rotated, "operator's": operator} {
		if _, err := s.Company(c.ID); err != nil {
			t.Fatalf("the %s company %d: %v, want it kept", what, c.ID, err)
		}
	}
	if u, err := s.User(vOwner.ID); err != nil || !u.EmailVerified {
		t.Fatalf("verified owner: %+v (%v)", u, err)
	}
	// A batch of no company looks at none, and says none is left.
	if n, last, err := s.PruneAbandonedSignups(cutoff, now, 0, 0); n != 0 || last != 0 || err != nil {
		t.Fatalf("a batch of 0: %d removed, last %d (%v), want 0, 0", n, last, err)
	}
	// Nothing left to remove: a second pass removes nothing.
	if n := pruneAllSignups(t, s, cutoff, now, 1000); n != 0 {
		t.Fatalf("a second pass removed %d, want 0", n)
	}
	// The address is free, under new ids.
	again, owner, _ := Signup(t, s, goneOwner.Email, now)
	if again.ID <= operator.ID || owner.ID <= goneOwner2.ID || again.ID == gone.ID || owner.ID == goneOwner.ID {
		t.Fatalf("the new sign-up got company %d user %d; the removed ones were %d and %d, the newest company before %d", again.ID, owner.ID, gone.ID, goneOwner.ID, operator.ID)
	}
	if got, err := s.UserByEmail(goneOwner.Email); err != nil || got.ID != owner.ID || got.CompanyID != again.ID {
		t.Fatalf("the address signed up again: %+v (%v)", got, err)
	}
}

// accountsAbandonedSignupRace: a verification and the prune of the same
// sign-up, at once: either the verification commits first and the company
// stays, verified, or the prune does and the link is gone with it. Never
// a verified owner removed, nor a company kept with its link spent and
// its owner unverified.
func accountsAbandonedSignupRace(t *testing.T, s AccountsStore) {
	const rounds = 24
	for range rounds {
		created := T0.Add(-9 * 24 * time.Hour)
		c, u, h := Signup(t, s, fmt.Sprintf("race-%d@example.com", unique()), created)
		expires := created.Add(24 * time.Hour)
		// The link is followed a second before it expires; the prune's clock
		// reads a second after: for it, the link has expired.
		var wg sync.WaitGroup
		var verr, perr error
		wg.Go(func() {
			_, verr = s.ConsumeOneTimeToken(h, []string{"verify"}, expires.Add(-time.Second), false, func(u *store.User) error {
				u.EmailVerified = true
				return nil
			})
		})
		wg.Go(func() {
			_, _, perr = s.PruneAbandonedSignups(expires.Add(time.Second), expires.Add(time.Second), c.ID-1, 1)
		})
		wg.Wait()
		if perr != nil {
			t.Fatal(perr)
		}
		got, err := s.User(u.ID)
		switch {
		case verr == nil:
			if err != nil || !got.EmailVerified {
				t.Fatalf("verified, then the owner reads %+v (%v)", got, err)
			}
			if _, err := s.Company(c.ID); err != nil {
				t.Fatalf("verified, then the company: %v", err)
			}
		case errors.Is(verr, store.ErrNotFound):
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the link was gone, yet the owner reads %+v (%v)", got, err)
			}
			if _, err := s.Company(c.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the link was gone, yet the company: %v", err)
			}
		default:
			t.Fatalf("verification: %v", verr)
		}
	}
}
