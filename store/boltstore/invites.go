package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// E-mail addresses and companies. Login names only an address, so an address
// signs in to one account on the whole server: the users_by_email index holds
// the addresses that accounts hold. An account holds its address once it has a
// password: a signed-up owner (verified or not: signup's 409 for a used address
// stays) or an invitee who accepted by setting one. A pending invitation is the
// inviting company's business only and enters no server-wide index, so another
// company's invitation never blocks a signup, and inviting answers alike
// whether or not the address has an account elsewhere.

// InviteUser stores a user invited into an existing company, without a
// password and outside the e-mail index. Within the company an address is
// there at most once (ErrConflict: a member or a pending invitee of the same
// company, no cross-tenant oracle), which the company's own index of
// addresses (company_emails, users.go) answers in one lookup. heldElsewhere
// says whether another account holds the address now; it chooses the
// wording of the invitation mail and must not reach the inviting company.
//
// An invitation counts against the company's daily storage budget (a
// *BudgetError when spent): the user record, its token and its mail. A
// company that has store.MaxUsers users gets ErrTooManyUsers.
func (s *Store) InviteUser(u *User, now time.Time) (heldElsewhere bool, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketCompanies).Get(itob(u.CompanyID)) == nil {
			return ErrNotFound
		}
		// An address the company has already is told as such, before the
		// count: at the cap it would otherwise read as "remove one first".
		if tx.Bucket(bucketCompanyEmails).Get(companyEmailKey(u.CompanyID, u.Email)) != nil {
			return ErrConflict
		}
		if companyUserCount(tx, u.CompanyID, store.MaxUsers) >= store.MaxUsers {
			return store.ErrTooManyUsers
		}
		if err := s.charge(tx, u.CompanyID, now, store.InvitationCost); err != nil {
			return err
		}
		users := tx.Bucket(bucketUsers)
		heldElsewhere = tx.Bucket(bucketUsersByEmail).Get(emailKey(u.Email)) != nil
		id, err := users.NextSequence()
		if err != nil {
			return err
		}
		u.ID = id
		// A member or a pending invitee of the company with the address
		// refuses it (ErrConflict).
		if err := addCompanyEmail(tx, *u); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCompanyUsers).Put(pair(u.CompanyID, id), nil); err != nil {
			return err
		}
		if err := addActivity(tx, u.CompanyID, store.InviteActivity(*u, inviterEmail(tx, *u))); err != nil {
			return err
		}
		return putJSON(users, itob(id), u)
	})
	if err != nil {
		return false, fmt.Errorf("store: invite user: %w", err)
	}
	return heldElsewhere, nil
}

// inviterEmail is the address of the user who invited u, for the activity
// line: "" when none did, or when that user is not (or no longer) one of
// u's company.
func inviterEmail(tx *bolt.Tx, u User) string {
	if u.InvitedBy == 0 {
		return ""
	}
	var by User
	if err := getJSON(tx.Bucket(bucketUsers), itob(u.InvitedBy), &by); err != nil || by.CompanyID != u.CompanyID {
		return ""
	}
	return by.Email
}

// claimEmail makes u hold its address once it has a password: the address
// enters the index, or the claim fails with ErrConflict when another account
// took it first (an invitee whose address was signed up meanwhile).
func claimEmail(tx *bolt.Tx, u User) error {
	if u.PasswordHash == "" {
		return nil
	}
	byEmail := tx.Bucket(bucketUsersByEmail)
	key := emailKey(u.Email)
	switch held := byEmail.Get(key); {
	case held == nil:
		return byEmail.Put(key, itob(u.ID))
	case btoi(held) != u.ID:
		return ErrConflict
	}
	return nil
}

// releaseEmail drops u's address from the index if u holds it; a pending
// invitee of one company must never free the address of another's account.
func releaseEmail(tx *bolt.Tx, u User) error {
	byEmail := tx.Bucket(bucketUsersByEmail)
	key := emailKey(u.Email)
	if held := byEmail.Get(key); held != nil && btoi(held) == u.ID {
		return byEmail.Delete(key)
	}
	return nil
}

// migratePendingInvitesOutOfEmailIndex takes invitees who never set a password
// out of the e-mail index, which used to hold every user: their addresses no
// longer block a signup or another company's invitation.
func migratePendingInvitesOutOfEmailIndex(tx *bolt.Tx) error {
	byEmail := tx.Bucket(bucketUsersByEmail)
	users := tx.Bucket(bucketUsers)
	_, err := deleteWhere(byEmail, func(_, v []byte) (bool, error) {
		var u User
		if err := getJSON(users, v, &u); err != nil {
			if errors.Is(err, ErrNotFound) {
				return true, nil // an index entry without its user: stale
			}
			return false, err
		}
		return u.PasswordHash == "", nil
	})
	return err
}
