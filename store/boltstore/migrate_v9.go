package boltstore

import (
	"bytes"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// Schema 9 keeps each company's addresses (company_emails, users.go), so an
// invitation finds a same-address member or pending invitee of its company
// with one lookup where it read every user of the company. Its migration
// builds the index from the stored users, after emptying it, in steps of
// MigrateV9Batch memberships, each committing its entries with its place
// (as the one to schema 8), so that no transaction holds the index of a
// large store whole: one read of each user and one write. Should a company
// hold an address twice (only a store's own CreateUser of an invitee's
// address, which no server path calls, could have done so), the user of the
// lowest id keeps the entry.

// MigrateV9Batch is how many memberships (company_users) one step of the
// migration to schema 9 indexes.
const MigrateV9Batch = 50000

// keyV9Cursor is the key of the last membership indexed; empty until the
// first one is.
var keyV9Cursor = []byte("migrate_v9_cursor")

func migrateCompanyEmails(tx *bolt.Tx) (bool, error) {
	return migrateCompanyEmailsIn(tx, MigrateV9Batch)
}

func migrateCompanyEmailsIn(tx *bolt.Tx, batch int) (bool, error) {
	meta := tx.Bucket(bucketMeta)
	after := meta.Get(keyV9Cursor)
	if after == nil {
		if tx.Bucket(bucketCompanyEmails) != nil {
			if err := tx.DeleteBucket(bucketCompanyEmails); err != nil {
				return false, err
			}
		}
		if _, err := tx.CreateBucket(bucketCompanyEmails); err != nil {
			return false, err
		}
		return false, meta.Put(keyV9Cursor, []byte{})
	}
	index := tx.Bucket(bucketCompanyEmails)
	users := tx.Bucket(bucketUsers)
	c := tx.Bucket(bucketCompanyUsers).Cursor()
	k, _ := c.Seek(after)
	if len(after) > 0 && bytes.Equal(k, after) {
		k, _ = c.Next()
	}
	var last []byte
	for n := 0; k != nil && n < batch; k, _ = c.Next() {
		last, n = k, n+1
		if len(k) != 16 {
			continue
		}
		var u User
		if err := getJSON(users, k[8:], &u); errors.Is(err, ErrNotFound) {
			continue // a membership without its user: nothing to index
		} else if err != nil {
			return false, err
		}
		key := companyEmailKey(btoi(k[:8]), u.Email)
		if index.Get(key) != nil {
			continue
		}
		if err := index.Put(key, bytes.Clone(k[8:])); err != nil {
			return false, err
		}
	}
	if last != nil {
		return false, meta.Put(keyV9Cursor, bytes.Clone(last))
	}
	return true, meta.Delete(keyV9Cursor)
}
