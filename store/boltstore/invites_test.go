package boltstore

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMigrationTakesPendingInvitesOutOfTheIndex: a store written when every
// user entered the e-mail index comes out with only the addresses that
// accounts hold (those with a password) in it.
func TestMigrationTakesPendingInvitesOutOfTheIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, owner := newCompany(t, s, "owner@example.com", "h1")
	// The old way: an invitee without a password in the global index, at schema version 1.
	pending := User{CompanyID: c.ID, Email: "Pending@Example.com", Role: RoleMember}
	joined := User{CompanyID: c.ID, Email: "joined@example.com", Role: RoleMember, PasswordHash: "set"}
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, u := range []*User{&pending, &joined} {
			if err := insertUser(tx, u); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	if v, _ := s.Version(); v != SchemaVersion() {
		t.Fatalf("schema version: got %d, want %d", v, SchemaVersion())
	}
	if _, err := s.UserByEmail("pending@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pending invitee by e-mail: got %v, want ErrNotFound", err)
	}
	for _, u := range []User{owner, joined} {
		if got, err := s.UserByEmail(u.Email); err != nil || got.ID != u.ID {
			t.Fatalf("%s by e-mail: got %+v, %v", u.Email, got, err)
		}
	}
	// The pending invitee is still the company's, and its address is free elsewhere.
	if u, err := s.User(pending.ID); err != nil || u.CompanyID != c.ID {
		t.Fatalf("pending invitee: got %+v, %v", u, err)
	}
	_, other := newCompany(t, s, "pending@example.com", "h2")
	if other.ID == 0 {
		t.Fatal("signup with a pending invitee's address failed")
	}
	// Within its company the address is there once.
	if _, err := s.InviteUser(&User{CompanyID: c.ID, Email: "PENDING@example.com"}, time.Now()); !errors.Is(err, ErrConflict) {
		t.Fatalf("second invitation within the company: got %v, want ErrConflict", err)
	}
}
