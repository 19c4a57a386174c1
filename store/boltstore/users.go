package boltstore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/simrelay/simrelay/store"
	bolt "go.etcd.io/bbolt"
)

func emailKey(email string) []byte { return []byte(store.EmailKey(email)) }

// companyEmailKey is the key of a company's address in company_emails: the
// company's id, then the address as users_by_email keys it. Within a company
// an address is there at most once, whoever holds it: a member or a pending
// invitee, so an invitation finds a same-address user of its company with
// one lookup instead of reading every user.
func companyEmailKey(companyID uint64, email string) []byte {
	return append(itob(companyID), emailKey(email)...)
}

// addCompanyEmail enters u's address in its company's index, or fails with
// ErrConflict when a user of the company has it already.
func addCompanyEmail(tx *bolt.Tx, u User) error {
	b := tx.Bucket(bucketCompanyEmails)
	key := companyEmailKey(u.CompanyID, u.Email)
	if b.Get(key) != nil {
		return ErrConflict
	}
	return b.Put(key, itob(u.ID))
}

// dropCompanyEmail takes u's address out of its company's index if it is
// u's entry.
func dropCompanyEmail(tx *bolt.Tx, u User) error {
	b := tx.Bucket(bucketCompanyEmails)
	key := companyEmailKey(u.CompanyID, u.Email)
	if held := b.Get(key); held != nil && btoi(held) == u.ID {
		return b.Delete(key)
	}
	return nil
}

func insertUser(tx *bolt.Tx, u *User) error {
	byEmail := tx.Bucket(bucketUsersByEmail)
	if byEmail.Get(emailKey(u.Email)) != nil {
		return ErrConflict
	}
	users := tx.Bucket(bucketUsers)
	id, err := users.NextSequence()
	if err != nil {
		return err
	}
	u.ID = id
	if err := byEmail.Put(emailKey(u.Email), itob(id)); err != nil {
		return err
	}
	// A pending invitee of the company may have the address (ErrConflict).
	if err := addCompanyEmail(tx, *u); err != nil {
		return err
	}
	if err := tx.Bucket(bucketCompanyUsers).Put(pair(u.CompanyID, id), nil); err != nil {
		return err
	}
	return putJSON(users, itob(id), u)
}

// CreateUser stores a new user of an existing company; the e-mail must be
// unused, by an account anywhere or by a pending invitee of the company
// (ErrConflict).
func (s *Store) CreateUser(u *User) error {
	err := s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketCompanies).Get(itob(u.CompanyID)) == nil {
			return ErrNotFound
		}
		return insertUser(tx, u)
	})
	if err != nil {
		return fmt.Errorf("store: create user: %w", err)
	}
	return nil
}

// User returns one user. A user of a company closing (MarkCompanyClosing)
// is ErrNotFound: every sign-in of the company (an access token, a console
// session, a refresh) is refused from the mark on, though the removal's
// first step has not taken its users yet (or failed).
func (s *Store) User(id uint64) (User, error) {
	var u User
	err := s.view(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketUsers), itob(id), &u); err != nil {
			return err
		}
		if err := companyOpen(tx, u.CompanyID); err != nil {
			u = User{}
			return err
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("store: user %d: %w", id, err)
	}
	return u, nil
}

// UserByEmail finds a user by e-mail, ignoring case. A user of a company
// closing (MarkCompanyClosing) is ErrNotFound, as for User: no login or
// reset finds the account from the mark on. The address stays held until
// the removal's first step takes it: CreateCompany and an invitee's claim
// of it are ErrConflict until then.
func (s *Store) UserByEmail(email string) (User, error) {
	var u User
	err := s.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketUsersByEmail).Get(emailKey(email))
		if id == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bucketUsers), id, &u); err != nil {
			return err
		}
		if err := companyOpen(tx, u.CompanyID); err != nil {
			u = User{}
			return err
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("store: user by email: %w", err)
	}
	return u, nil
}

// companyUserCount counts a company's users, stopping at limit.
func companyUserCount(tx *bolt.Tx, companyID uint64, limit int) int {
	n := 0
	prefix := itob(companyID)
	c := tx.Bucket(bucketCompanyUsers).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < limit; k, _ = c.Next() {
		n++
	}
	return n
}

func companyUserIDs(tx *bolt.Tx, companyID uint64) []uint64 {
	var ids []uint64
	prefix := itob(companyID)
	c := tx.Bucket(bucketCompanyUsers).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, btoi(k[8:]))
	}
	return ids
}

// CompanyUsers lists a company's users, oldest first.
func (s *Store) CompanyUsers(companyID uint64) ([]User, error) {
	var out []User
	err := s.view(func(tx *bolt.Tx) error {
		users := tx.Bucket(bucketUsers)
		for _, id := range companyUserIDs(tx, companyID) {
			var u User
			if err := getJSON(users, itob(id), &u); err != nil {
				return err
			}
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: users of company %d: %w", companyID, err)
	}
	return out, nil
}

// otherAdmin says whether the company has an admin who can sign in besides
// one user: an invited admin who never set a password cannot stand in for
// the last one. It reads the company's users until it finds one.
func otherAdmin(tx *bolt.Tx, companyID, except uint64) (bool, error) {
	users := tx.Bucket(bucketUsers)
	for _, id := range companyUserIDs(tx, companyID) {
		if id == except {
			continue
		}
		var u User
		if err := getJSON(users, itob(id), &u); err != nil {
			return false, err
		}
		if u.Role == RoleAdmin && u.PasswordHash != "" {
			return true, nil
		}
	}
	return false, nil
}

// UpdateUser applies fn to a user and stores the result. fn runs inside the
// write transaction. A change of role that would leave the company without an
// admin fails with ErrLastAdmin; the e-mail and ids cannot change here.
func (s *Store) UpdateUser(id uint64, fn func(*User) error) (User, error) {
	var u User
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUsers)
		if err := getJSON(b, itob(id), &u); err != nil {
			return err
		}
		before := u
		if err := fn(&u); err != nil {
			return err
		}
		u.ID, u.CompanyID, u.Email, u.CreatedAt = before.ID, before.CompanyID, before.Email, before.CreatedAt
		if before.Role == RoleAdmin && u.Role != RoleAdmin {
			ok, err := otherAdmin(tx, u.CompanyID, u.ID)
			if err != nil {
				return err
			}
			if !ok {
				return ErrLastAdmin
			}
		}
		return putJSON(b, itob(id), &u)
	})
	if err != nil {
		return u, fmt.Errorf("store: update user %d: %w", id, err)
	}
	return u, nil
}

// DeleteUser removes a user, their e-mail index entry, their sessions and
// the pairing codes they made that no phone used yet (revokeUserFamilies).
// Removing the last admin of a company fails with ErrLastAdmin.
func (s *Store) DeleteUser(id uint64) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUsers)
		var u User
		if err := getJSON(b, itob(id), &u); err != nil {
			return err
		}
		if u.Role == RoleAdmin {
			ok, err := otherAdmin(tx, u.CompanyID, u.ID)
			if err != nil {
				return err
			}
			if !ok {
				return ErrLastAdmin
			}
		}
		if err := revokeUserFamilies(tx, id); err != nil {
			return err
		}
		if err := releaseEmail(tx, u); err != nil {
			return err
		}
		if err := dropCompanyEmail(tx, u); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCompanyUsers).Delete(pair(u.CompanyID, id)); err != nil {
			return err
		}
		return b.Delete(itob(id))
	})
	if err != nil {
		return fmt.Errorf("store: delete user %d: %w", id, err)
	}
	return nil
}

// dropPairings deletes the pairing codes that no phone used yet and whose
// maker's credential ended (gone): a user removed, the API key rotated
// (store.Pairing). A phone that tries one afterwards is told it is wrong,
// used or expired. Codes are not indexed by their maker; the bucket holds
// the codes of the last day or so (PrunePairings), each a few dozen bytes,
// and a removal or a rotation is rare.
func dropPairings(tx *bolt.Tx, gone func(Pairing) bool) error {
	b := tx.Bucket(bucketPairings)
	var drop [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var p Pairing
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		if p.UsedAt.IsZero() && gone(p) {
			drop = append(drop, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
