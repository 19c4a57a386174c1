package boltstore

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// AppendMail adds a mail to the outbox and gives it its ID.
func (s *Store) AppendMail(m *Mail) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMailOutbox)
		id, err := b.NextSequence()
		if err != nil {
			return err
		}
		m.ID = id
		return putJSON(b, itob(id), m)
	})
	if err != nil {
		return fmt.Errorf("store: append mail: %w", err)
	}
	return nil
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
		fn(&m)
		m.ID = id
		return putJSON(b, itob(id), &m)
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
