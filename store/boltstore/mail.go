package boltstore

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// bucketMailCompanyPending indexes the pending mails of companies
// (Mail.CompanyID set): company id + mail id -> MailSize, so that a
// company's pending mails are counted by a seek over its own keys.
var bucketMailCompanyPending = []byte("mail_company_pending")

// bucketMailCompany indexes every mail of a company (Mail.CompanyID set),
// pending or done: company id + mail id -> nothing, so that the company's
// removal finds its mails by a seek over its own keys rather than reading
// the outbox whole, a week of every company's mail (schema 14,
// migrate_v14.go). Its keys begin with a company id, but it is listed
// with the buckets keyed otherwise (notCompanyKeyed): a company's done
// mail kept it from being an abandoned sign-up no more than before, and
// the removal takes the entries with their mails (removeCompanyMail).
var bucketMailCompany = []byte("mail_company")

// AppendMail adds a mail to the outbox and gives it its ID. A mail with a
// CompanyID is indexed as the company's, without a bound.
func (s *Store) AppendMail(m *Mail) error {
	err := s.update(func(tx *bolt.Tx) error { return s.appendMail(tx, m, nil) })
	if err != nil {
		return fmt.Errorf("store: append mail: %w", err)
	}
	return nil
}

// AppendCompanyMail adds a mail of m.CompanyID's (an e-mail webhook
// entry's) to the outbox and gives it its ID, unless the company's pending
// mails would go over lim: then nothing is stored and the error is a
// *store.MailOutboxFullError. The mail counts against the company's daily
// storage budget on the day of its CreatedAt, after the fact: it is never
// refused for it (the event it tells of was admitted).
func (s *Store) AppendCompanyMail(m *Mail, lim store.MailLimits) error {
	if m.CompanyID == 0 {
		return fmt.Errorf("store: append company mail: %w: no company", ErrConflict)
	}
	var full *store.MailOutboxFullError
	err := s.update(func(tx *bolt.Tx) error {
		full = nil
		if err := companyOpen(tx, m.CompanyID); err != nil {
			return err
		}
		return s.appendMail(tx, m, &lim)
	})
	if errors.As(err, &full) {
		return full
	}
	if err != nil {
		return fmt.Errorf("store: append mail: %w", err)
	}
	return nil
}

// appendMail stores m; with lim, it first checks the company's bound and
// charges the company's budget.
func (s *Store) appendMail(tx *bolt.Tx, m *Mail, lim *store.MailLimits) error {
	size := store.MailSize(*m)
	if lim != nil {
		pending, pendingBytes := companyMailPending(tx, m.CompanyID)
		if lim.Over(pending, pendingBytes, size) {
			return &store.MailOutboxFullError{CompanyID: m.CompanyID, Pending: pending, PendingBytes: pendingBytes, Limits: *lim}
		}
		if err := s.chargeAfter(tx, m.CompanyID, m.CreatedAt, size+store.MailRowCost); err != nil {
			return err
		}
	}
	b := tx.Bucket(bucketMailOutbox)
	id, err := b.NextSequence()
	if err != nil {
		return err
	}
	m.ID = id
	if err := putJSON(b, itob(id), m); err != nil {
		return err
	}
	if err := indexMail(tx, *m); err != nil {
		return err
	}
	return indexCompanyMail(tx, *m, size)
}

// indexMail gives m, appended, its entry in bucketMailCompany: once, as
// its company never changes (UpdateMail writes no entry).
func indexMail(tx *bolt.Tx, m Mail) error {
	if m.CompanyID == 0 {
		return nil
	}
	return tx.Bucket(bucketMailCompany).Put(pair(m.CompanyID, m.ID), nil)
}

// unindexMail drops m's entry from bucketMailCompany, m deleted.
func unindexMail(tx *bolt.Tx, m Mail) error {
	if m.CompanyID == 0 {
		return nil
	}
	return tx.Bucket(bucketMailCompany).Delete(pair(m.CompanyID, m.ID))
}

// indexCompanyMail keeps m's entry in bucketMailCompanyPending: there while
// it is pending, gone once it is not. size is what the entry counts (the
// mail's MailSize when it was queued).
func indexCompanyMail(tx *bolt.Tx, m Mail, size int64) error {
	if m.CompanyID == 0 {
		return nil
	}
	b, key := tx.Bucket(bucketMailCompanyPending), pair(m.CompanyID, m.ID)
	if m.State != MailPending {
		return b.Delete(key)
	}
	if b.Get(key) != nil {
		return nil
	}
	return b.Put(key, itob(uint64(size)))
}

// companyMailPending counts the company's pending mails and their bytes.
func companyMailPending(tx *bolt.Tx, companyID uint64) (pending int, bytesSum int64) {
	prefix := itob(companyID)
	c := tx.Bucket(bucketMailCompanyPending).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		pending++
		if len(v) == 8 {
			bytesSum += int64(btoi(v))
		}
	}
	return pending, bytesSum
}

// MailOutboxSize is how many of the company's mails are pending in the
// outbox, and their bytes (store.MailSize as queued).
func (s *Store) MailOutboxSize(companyID uint64) (pending int, bytes int64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		pending, bytes = companyMailPending(tx, companyID)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: mail outbox size: %w", err)
	}
	return pending, bytes, nil
}

// ClaimMail returns the mail for one attempt, and whether it is still
// pending (false too when it is gone): the embedded store has one process, whose one mail worker is the
// claim, so nothing is written. (PostgreSQL's leases the mail to the node.)
func (s *Store) ClaimMail(id uint64) (Mail, bool, error) {
	var m Mail
	err := s.view(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketMailOutbox), itob(id), &m)
	})
	if errors.Is(err, ErrNotFound) { // pruned since the worker listed it
		return Mail{}, false, nil
	}
	if err != nil {
		return Mail{}, false, fmt.Errorf("store: claim mail %d: %w", id, err)
	}
	return m, m.State == MailPending, nil
}

// UpdateMail applies fn to one mail of the outbox and stores it.
func (s *Store) UpdateMail(id uint64, fn func(*Mail)) (Mail, error) {
	var m Mail
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMailOutbox)
		if err := getJSON(b, itob(id), &m); err != nil {
			return err
		}
		size := store.MailSize(m)
		fn(&m)
		m.ID = id
		if err := putJSON(b, itob(id), &m); err != nil {
			return err
		}
		return indexCompanyMail(tx, m, size)
	})
	if err != nil {
		return m, fmt.Errorf("store: update mail %d: %w", id, err)
	}
	return m, nil
}

// Mails lists the outbox, oldest first. With pendingOnly it lists only mails
// still waiting for delivery.
func (s *Store) Mails(pendingOnly bool) ([]Mail, error) {
	var out []Mail
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMailOutbox).ForEach(func(_, v []byte) error {
			var m Mail
			if err := jsonUnmarshal(v, &m); err != nil {
				return err
			}
			if !pendingOnly || m.State == MailPending {
				out = append(out, m)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: list mail: %w", err)
	}
	return out, nil
}
