package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/store"
)

// Opt-outs: the numbers a company must not send SMS to. A recipient puts
// itself on the list by answering STOP (and the like) and takes itself off
// with START; the company can add and remove numbers too. The list is read
// inside every SMS send's transaction, and again when a scheduled message
// becomes due, so no send slips between a STOP and the check.

var bucketOptOuts = []byte("opt_outs") // company id + phone -> OptOut

func optOutKey(companyID uint64, phone string) []byte {
	k := make([]byte, 8, 8+len(phone)) // no second slice for append
	binary.BigEndian.PutUint64(k, companyID)
	return append(k, phone...)
}

// optedOutTx refuses an SMS (channel sms or unset) to a number on the
// company's list with an *OptOutError; other channels are not SMS and pass.
func (s *Store) optedOutTx(tx *bolt.Tx, companyID uint64, channel, phone string, index int) error {
	if channel != "" && channel != "sms" {
		return nil
	}
	if tx.Bucket(bucketOptOuts).Get(optOutKey(companyID, phone)) != nil {
		return &OptOutError{Phone: phone, Index: index}
	}
	return nil
}

// applyOptOutKeyword reads a new inbound SMS for a stop or start keyword and
// updates the sender's entry, in the transaction that stores the message.
// The write was admitted with the message, so it is charged after it.
// The entry names the sender as sends name recipients (optOutSender), so a
// STOP from a phone that reports 15557650001 stops sends to +15557650001.
//
// overBudget is a message the daily budget refused (nothing of it is
// stored): a stop keyword still lists its sender, charged against the
// opt-out overdraft (chargeOptOut), so that the sends accepted before it
// stop now, not when the phone's resend is stored after midnight; past the
// overdraft it waits for that resend, as a start keyword always does.
func (s *Store) applyOptOutKeyword(tx *bolt.Tx, m Message, overBudget bool) error {
	if m.Channel != "" && m.Channel != "sms" {
		return nil
	}
	stop, start := store.KeywordOf(m.Text)
	if !stop && !start || overBudget && start {
		return nil
	}
	var c Company
	if err := getJSON(tx.Bucket(bucketCompanies), itob(m.CompanyID), &c); err != nil {
		return fmt.Errorf("opt-out keyword: company %d: %w", m.CompanyID, err)
	}
	if c.OptOutKeywords != nil && !*c.OptOutKeywords {
		return nil
	}
	who := optOutSender(m.Phone)
	b := tx.Bucket(bucketOptOuts)
	key := optOutKey(m.CompanyID, who)
	if start {
		return b.Delete(key)
	}
	if b.Get(key) != nil {
		return nil
	}
	if overBudget {
		if err := s.chargeOptOut(tx, m.CompanyID, m.CreatedAt, store.OptOutCost); err != nil {
			if errors.As(err, new(*BudgetError)) {
				return nil
			}
			return err
		}
	} else if err := s.chargeAfter(tx, m.CompanyID, m.CreatedAt, store.OptOutCost); err != nil {
		return err
	}
	return putJSON(b, key, OptOut{Phone: who, Source: OptOutKeyword, CreatedAt: m.CreatedAt})
}

// optOutSender is the list's name for the sender of a keyword: its E.164
// form when it is a number, with or without its + (phone.NormalizeSender),
// else exactly as the phone reported it (a short code or a name, which no
// send can name but the company may still see and remove).
func optOutSender(from string) string {
	if n, ok := phone.NormalizeSender(from); ok {
		return n
	}
	return from
}

// AddOptOut puts phone (E.164) on the company's list; created is false when
// it was there already (and the stored entry comes back unchanged).
func (s *Store) AddOptOut(companyID uint64, phone string, now time.Time) (o OptOut, created bool, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		if err := companyOpen(tx, companyID); err != nil {
			return err
		}
		b := tx.Bucket(bucketOptOuts)
		key := optOutKey(companyID, phone)
		if err := getJSON(b, key, &o); err == nil {
			created = false
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := s.chargeOptOut(tx, companyID, now, store.OptOutCost); err != nil {
			return err
		}
		o, created = OptOut{Phone: phone, Source: OptOutAPI, CreatedAt: now.UTC()}, true
		return putJSON(b, key, o)
	})
	if err != nil {
		return o, false, fmt.Errorf("store: add opt-out: %w", err)
	}
	return o, created, nil
}

// RemoveOptOut takes phone off the company's list; ErrNotFound when it is not on it.
func (s *Store) RemoveOptOut(companyID uint64, phone string) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOptOuts)
		key := optOutKey(companyID, phone)
		if b.Get(key) == nil {
			return ErrNotFound
		}
		return b.Delete(key)
	})
	if err != nil {
		return fmt.Errorf("store: remove opt-out: %w", err)
	}
	return nil
}

// OptedOut reports whether phone (E.164, or a keyword sender's form) is on
// the company's list. A send reads the list again in its own transaction;
// this read is for a caller that wants to know before it sends.
func (s *Store) OptedOut(companyID uint64, phone string) (bool, error) {
	var listed bool
	err := s.view(func(tx *bolt.Tx) error {
		listed = tx.Bucket(bucketOptOuts).Get(optOutKey(companyID, phone)) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: opt-out of company %d: %w", companyID, err)
	}
	return listed, nil
}

// OptOuts returns one page of the company's list in number order (after the
// number after, "" for the first page), at most limit entries.
func (s *Store) OptOuts(companyID uint64, after string, limit int) ([]OptOut, error) {
	out := []OptOut{}
	err := s.view(func(tx *bolt.Tx) error {
		prefix := itob(companyID)
		c := tx.Bucket(bucketOptOuts).Cursor()
		k, v := c.Seek(optOutKey(companyID, after))
		if after != "" && k != nil && bytes.Equal(k, optOutKey(companyID, after)) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			var o OptOut
			if err := jsonUnmarshal(v, &o); err != nil {
				return err
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: opt-outs of company %d: %w", companyID, err)
	}
	return out, nil
}
