package boltstore

import (
	"bytes"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

func emailKey(email string) []byte { return []byte(strings.ToLower(strings.TrimSpace(email))) }

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
	if err := tx.Bucket(bucketCompanyUsers).Put(pair(u.CompanyID, id), nil); err != nil {
		return err
	}
	return putJSON(users, itob(id), u)
}

// CreateUser stores a new user of an existing company; the e-mail must be unused (ErrConflict).
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

// User returns one user.
func (s *Store) User(id uint64) (User, error) {
	var u User
	err := s.view(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketUsers), itob(id), &u)
	})
	if err != nil {
		return u, fmt.Errorf("store: user %d: %w", id, err)
	}
	return u, nil
}

// UserByEmail finds a user by e-mail, ignoring case.
func (s *Store) UserByEmail(email string) (User, error) {
	var u User
	err := s.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketUsersByEmail).Get(emailKey(email))
		if id == nil {
			return ErrNotFound
		}
		return getJSON(tx.Bucket(bucketUsers), id, &u)
	})
	if err != nil {
		return u, fmt.Errorf("store: user by email: %w", err)
	}
	return u, nil
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

// countAdmins counts the admins of a company who can sign in, leaving out one
// user: an invited admin who never set a password cannot stand in for the last one.
func countAdmins(tx *bolt.Tx, companyID, except uint64) (int, error) {
	n := 0
	users := tx.Bucket(bucketUsers)
	for _, id := range companyUserIDs(tx, companyID) {
		if id == except {
			continue
		}
		var u User
		if err := getJSON(users, itob(id), &u); err != nil {
			return 0, err
		}
		if u.Role == RoleAdmin && u.PasswordHash != "" {
			n++
		}
	}
	return n, nil
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
			n, err := countAdmins(tx, u.CompanyID, u.ID)
			if err != nil {
				return err
			}
			if n == 0 {
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

// DeleteUser removes a user, their e-mail index entry and their sessions.
// Removing the last admin of a company fails with ErrLastAdmin.
func (s *Store) DeleteUser(id uint64) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUsers)
		var u User
		if err := getJSON(b, itob(id), &u); err != nil {
			return err
		}
		if u.Role == RoleAdmin {
			n, err := countAdmins(tx, u.CompanyID, u.ID)
			if err != nil {
				return err
			}
			if n == 0 {
				return ErrLastAdmin
			}
		}
		if err := revokeUserFamilies(tx, id); err != nil {
			return err
		}
		if err := releaseEmail(tx, u); err != nil {
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
