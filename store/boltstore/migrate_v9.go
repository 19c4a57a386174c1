package boltstore

import (
	"bytes"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// Schema 9 keeps each company's addresses (company_emails, users.go), so an
// invitation finds a same-address member or pending invitee of its company
// with one lookup where it read every user of the company. Its migration
// builds the index from the stored users in one transaction, after emptying
// it: one read of each user and one write. Should a company hold an address
// twice (only a store's own CreateUser of an invitee's address, which no
// server path calls, could have done so), the user of the lowest id keeps
// the entry.
func migrateCompanyEmails(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bucketCompanyEmails); err != nil {
		return err
	}
	index, err := tx.CreateBucket(bucketCompanyEmails)
	if err != nil {
		return err
	}
	users := tx.Bucket(bucketUsers)
	c := tx.Bucket(bucketCompanyUsers).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != 16 {
			continue
		}
		var u User
		if err := getJSON(users, k[8:], &u); errors.Is(err, ErrNotFound) {
			continue // a membership without its user: nothing to index
		} else if err != nil {
			return err
		}
		key := companyEmailKey(btoi(k[:8]), u.Email)
		if index.Get(key) != nil {
			continue
		}
		if err := index.Put(key, bytes.Clone(k[8:])); err != nil {
			return err
		}
	}
	return nil
}
