package boltstore

import (
	bolt "go.etcd.io/bbolt"
)

// Schema 14 indexes every mail of a company by the company (mail_company,
// bucketMailCompany), which a company's removal reads in place of the
// whole outbox. Its migration reads the outbox once in one transaction
// and indexes the mails that name a company. A build before schema 14,
// which would store mails without indexing them, refuses the file.
func migrateMailCompany(tx *bolt.Tx) error {
	if tx.Bucket(bucketMailCompany) != nil {
		if err := tx.DeleteBucket(bucketMailCompany); err != nil {
			return err
		}
	}
	if _, err := tx.CreateBucket(bucketMailCompany); err != nil {
		return err
	}
	return tx.Bucket(bucketMailOutbox).ForEach(func(_, v []byte) error {
		var m Mail
		if err := jsonUnmarshal(v, &m); err != nil {
			return err
		}
		return indexMail(tx, m)
	})
}
