package boltstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Pruning of records nobody reads again once they have done their job:
// spent or expired pairing codes, refresh-token families without a token
// left, mail the outbox is done with, and old storage counters. Each
// function is one transaction and returns how many records it dropped.

// PrunePairings drops pairing codes that expired before cutoff, used or not.
func (s *Store) PrunePairings(cutoff time.Time) (int, error) {
	var n int
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		n, err = deleteWhere(tx.Bucket(bucketPairings), func(_, v []byte) (bool, error) {
			var p Pairing
			err := jsonUnmarshal(v, &p)
			return err == nil && p.ExpiresAt.Before(cutoff), err
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune pairing codes: %w", err)
	}
	return n, nil
}

// PruneTokenFamilies drops refresh-token families that have no refresh
// token left (PruneTokens drops expired tokens, used ones included), with
// their user_families index entries, and index entries whose family is
// gone. A family with a token still stored stays, revoked or not: that
// token must still be recognised, and refused as its family says.
func (s *Store) PruneTokenFamilies() (int, error) {
	var n int
	err := s.update(func(tx *bolt.Tx) error {
		live := map[string]bool{}
		if err := tx.Bucket(bucketRefreshTokens).ForEach(func(_, v []byte) error {
			var t RefreshToken
			if err := jsonUnmarshal(v, &t); err != nil {
				return err
			}
			live[t.Family] = true
			return nil
		}); err != nil {
			return err
		}
		families := tx.Bucket(bucketTokenFamilies)
		var err error
		if n, err = deleteWhere(families, func(k, _ []byte) (bool, error) { return !live[string(k)], nil }); err != nil {
			return err
		}
		_, err = deleteWhere(tx.Bucket(bucketUserFamilies), func(k, _ []byte) (bool, error) {
			return len(k) < 8 || families.Get(k[8:]) == nil, nil
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune token families: %w", err)
	}
	return n, nil
}

// PruneMail drops mails the outbox is done with: sent or logged ones created
// before doneCutoff, and any other (pending or failed) created before
// unsentCutoff, which it returns too so the caller can log them.
func (s *Store) PruneMail(doneCutoff, unsentCutoff time.Time) (done int, unsent []Mail, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		done, unsent = 0, nil
		_, err := deleteWhere(tx.Bucket(bucketMailOutbox), func(_, v []byte) (bool, error) {
			var m Mail
			if err := jsonUnmarshal(v, &m); err != nil {
				return false, err
			}
			switch m.State {
			case MailSent, MailLogged:
				if m.CreatedAt.Before(doneCutoff) {
					done++
					return true, unindexMail(tx, m)
				}
			default:
				if m.CreatedAt.Before(unsentCutoff) {
					if m.CompanyID != 0 {
						if err := tx.Bucket(bucketMailCompanyPending).Delete(pair(m.CompanyID, m.ID)); err != nil {
							return false, err
						}
					}
					if err := unindexMail(tx, m); err != nil {
						return false, err
					}
					m.Text, m.HTML = "", "" // the caller logs it; the links stay out of the log
					unsent = append(unsent, m)
					return true, nil
				}
			}
			return false, nil
		})
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("store: prune mail outbox: %w", err)
	}
	return done, unsent, nil
}

// PruneStorageCounters drops the daily storage counters of UTC days before
// the one of cutoff: only today's counter is ever consulted.
func (s *Store) PruneStorageCounters(cutoff time.Time) (int, error) {
	first := dayOf(cutoff)
	var n int
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		n, err = deleteWhere(tx.Bucket(bucketCompanyUsage), func(k, _ []byte) (bool, error) {
			return len(k) == 16 && btoi(k[8:]) < first, nil
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune storage counters: %w", err)
	}
	return n, nil
}
