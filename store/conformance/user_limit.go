package conformance

import (
	"errors"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// accountsUserLimit: a company has at most store.MaxUsers users, its
// invitations included; the one over it is ErrTooManyUsers and stores
// nothing (an address the company has already is ErrConflict still), a removal makes room, and another company's count is its own.
func accountsUserLimit(t *testing.T, s AccountsStore) {
	a, _ := Company(t, s) // its admin is the first user
	var last store.User
	for range store.MaxUsers - 1 {
		last = accountUser(a.ID, store.RoleMember, false)
		if _, err := s.InviteUser(&last, T0); err != nil {
			t.Fatal(err)
		}
	}
	over := accountUser(a.ID, store.RoleMember, false)
	if _, err := s.InviteUser(&over, T0); !errors.Is(err, store.ErrTooManyUsers) {
		t.Fatalf("user %d: %v, want ErrTooManyUsers", store.MaxUsers+1, err)
	}
	// An address the company has already is ErrConflict at the cap too:
	// the answer names what is wrong with this invitation.
	again := accountUser(a.ID, store.RoleMember, false)
	again.Email = last.Email
	if _, err := s.InviteUser(&again, T0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an address the company has, at the cap: %v, want ErrConflict", err)
	}
	if us, _ := s.CompanyUsers(a.ID); len(us) != store.MaxUsers {
		t.Fatalf("company users: %d, want %d", len(us), store.MaxUsers)
	}
	b, _ := Company(t, s)
	inB := accountUser(b.ID, store.RoleMember, false)
	if _, err := s.InviteUser(&inB, T0); err != nil {
		t.Fatalf("another company's invitation: %v", err)
	}
	if err := s.DeleteUser(last.ID); err != nil {
		t.Fatal(err)
	}
	over = accountUser(a.ID, store.RoleMember, false)
	if _, err := s.InviteUser(&over, T0); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
}
