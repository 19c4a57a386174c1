package boltstore

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// companyEmails reads the company_emails index whole.
func companyEmails(t *testing.T, s *Store) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCompanyEmails).ForEach(func(k, v []byte) error {
			got[string(k)] = btoi(v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// usersByCompanyEmail is what company_emails should hold, from a walk of
// the users: each company's addresses, case folded, to the user of the
// lowest id.
func usersByCompanyEmail(t *testing.T, s *Store) map[string]uint64 {
	t.Helper()
	want := map[string]uint64{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketUsers).ForEach(func(k, v []byte) error {
			var u User
			if err := jsonUnmarshal(v, &u); err != nil {
				return err
			}
			key := string(companyEmailKey(u.CompanyID, u.Email))
			if _, ok := want[key]; !ok {
				want[key] = btoi(k)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestMigrateV9IndexesCompanyEmails opens a store of schema 8 made by
// today's write paths (admins, members, pending invitees, a removed user),
// first with its company_emails index gone, then with one holding stale and
// wrong entries: each time the migration builds the index from the users,
// and an invitation of any stored address of the company, in another case,
// is ErrConflict while a removed user's address and another company's are
// free. The migration in steps, stopped half way, ends the same.
func TestMigrateV9IndexesCompanyEmails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	a, adminA := newCompany(t, s, "admin@alpha.example", "key-alpha")
	b, adminB := newCompany(t, s, "admin@beta.example", "key-beta")
	member := User{CompanyID: a.ID, Email: "member@alpha.example", Role: RoleMember, PasswordHash: "set"}
	if err := s.CreateUser(&member); err != nil {
		t.Fatal(err)
	}
	var invited []User
	for _, in := range []User{
		{CompanyID: a.ID, Email: " Pending@Alpha.example", Role: RoleMember},
		{CompanyID: a.ID, Email: "gone@alpha.example", Role: RoleMember},
		{CompanyID: b.ID, Email: "pending@alpha.example", Role: RoleAdmin}, // another company's invitee of the same address
	} {
		if _, err := s.InviteUser(&in, time.Now()); err != nil {
			t.Fatal(err)
		}
		invited = append(invited, in)
	}
	gone := invited[1]
	if err := s.DeleteUser(gone.ID); err != nil {
		t.Fatal(err)
	}
	kept := usersByCompanyEmail(t, s)
	if len(kept) != 5 {
		t.Fatalf("the fixture's users: %d addresses by company, want 5", len(kept))
	}
	if got := companyEmails(t, s); !maps.Equal(got, kept) {
		t.Fatalf("the index the write paths keep: %v, want %v", got, kept)
	}

	for _, drop := range []bool{true, false} {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			if drop {
				if err := tx.DeleteBucket(bucketCompanyEmails); err != nil {
					return err
				}
			} else {
				b := tx.Bucket(bucketCompanyEmails)
				for k, v := range map[string]uint64{
					string(companyEmailKey(a.ID, gone.Email)):   gone.ID,   // a removed user's
					string(companyEmailKey(a.ID, member.Email)): adminA.ID, // another user's id
				} {
					if err := b.Put([]byte(k), itob(v)); err != nil {
						return err
					}
				}
			}
			return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(8))
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, dir)
		if v, err := s.Version(); err != nil || v != SchemaVersion() {
			t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
		}
		if got := companyEmails(t, s); !maps.Equal(got, kept) {
			t.Fatalf("index dropped %v: %v after the migration, want %v", drop, got, kept)
		}
	}

	// In small steps, each in its own transaction, stopped half way (a
	// crash) and resumed by the next open: the same index, and no step
	// holds it whole.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(8))
	}); err != nil {
		t.Fatal(err)
	}
	steps := 0
	for ; steps < 3; steps++ {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			done, err := migrateCompanyEmailsIn(tx, 2)
			if err == nil && done {
				err = errors.New("done in 3 steps of 2 memberships, want more")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := companyEmails(t, s); len(got) == 0 || len(got) >= len(kept) {
		t.Fatalf("the index half way: %v, want a part of %v", got, kept)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyMigrating, itob(8)); err != nil {
			return err
		}
		return meta.Put(keySchemaVersion, itob(9))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if got := companyEmails(t, s); !maps.Equal(got, kept) {
		t.Fatalf("the index after a migration resumed: %v, want %v", got, kept)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta.Get(keyV9Cursor) != nil || meta.Get(keyMigrating) != nil {
			return errors.New("the migration's place is still kept after it ended")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, u := range []User{adminA, member, invited[0], adminB, invited[2]} {
		again := User{CompanyID: u.CompanyID, Email: strings.ToUpper(strings.TrimSpace(u.Email)), Role: RoleMember}
		if _, err := s.InviteUser(&again, time.Now()); !errors.Is(err, ErrConflict) {
			t.Fatalf("invite %s again into company %d: %v, want ErrConflict", again.Email, u.CompanyID, err)
		}
	}
	for _, in := range []User{
		{CompanyID: a.ID, Email: gone.Email, Role: RoleMember},             // the removed user's
		{CompanyID: b.ID, Email: "MEMBER@alpha.example", Role: RoleMember}, // company A's member
	} {
		if _, err := s.InviteUser(&in, time.Now()); err != nil {
			t.Fatalf("invite %s into company %d: %v", in.Email, in.CompanyID, err)
		}
		if got := companyEmails(t, s)[string(companyEmailKey(in.CompanyID, in.Email))]; got != in.ID {
			t.Fatalf("the index of %s in company %d: user %d, want %d", in.Email, in.CompanyID, got, in.ID)
		}
	}
}

// TestMigrateV9KeepsTheFirstOfTwins: a company that holds an address twice
// (two users stored under it directly) keeps the one of the lower id in the
// index, and removing the other leaves that entry.
func TestMigrateV9KeepsTheFirstOfTwins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	c, _ := newCompany(t, s, "owner@example.com", "key-twins")
	twins := []User{{CompanyID: c.ID, Email: "twin@example.com"}, {CompanyID: c.ID, Email: "TWIN@example.com"}}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		users := tx.Bucket(bucketUsers)
		for i := range twins {
			id, err := users.NextSequence()
			if err != nil {
				return err
			}
			twins[i].ID = id
			if err := tx.Bucket(bucketCompanyUsers).Put(pair(c.ID, id), nil); err != nil {
				return err
			}
			if err := putJSON(users, itob(id), &twins[i]); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(8))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	entry := func() uint64 { return companyEmails(t, s)[string(companyEmailKey(c.ID, "twin@example.com"))] }
	if got := entry(); got != twins[0].ID {
		t.Fatalf("the twins' entry: user %d, want %d", got, twins[0].ID)
	}
	if err := s.DeleteUser(twins[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := entry(); got != twins[0].ID {
		t.Fatalf("the twins' entry after the second left: user %d, want %d", got, twins[0].ID)
	}
}
