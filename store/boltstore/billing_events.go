package boltstore

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ApplyProviderEvent applies one payment-provider event to a company's
// subscription, at most once per event id: a retried delivery finds the id
// recorded and changes nothing (applied false).
//
// customer binds once: an event whose customer another company holds, or
// for a company that holds another customer, is ErrForeignCustomer and
// changes nothing but the record of its id. ordered events (those that carry
// the subscription's state) take part in ordering by created (unix s): fn is
// told stale when the subscription already holds a newer event's state
// (same-second events apply in the order they arrive), and must then leave
// the state alone; fn reports whether it changed the state, and only then
// does the event become the newest. A
// company that does not exist, or is closing (MarkCompanyClosing), is
// ErrNotFound and records nothing.
func (s *Store) ApplyProviderEvent(eventID string, companyID uint64, customer string, created int64, ordered bool, now time.Time, fn func(sub *Subscription, stale bool) bool) (applied bool, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		if err := companyOpen(tx, companyID); err != nil {
			return err
		}
		events := tx.Bucket(bucketBillingEvents)
		if events.Get([]byte(eventID)) != nil {
			return nil
		}
		if err := events.Put([]byte(eventID), itob(uint64(now.Unix()))); err != nil {
			return err
		}
		if customer != "" {
			if v := tx.Bucket(bucketCustomers).Get([]byte(customer)); len(v) == 8 && btoi(v) != companyID {
				return errForeign
			}
		}
		applied = true
		var out Subscription
		return updateSubscriptionTx(tx, companyID, func(sub *Subscription) error {
			if customer != "" && sub.CustomerID != "" && sub.CustomerID != customer {
				applied = false
				return errForeign
			}
			if customer != "" {
				sub.CustomerID = customer
			}
			stale := ordered && created < sub.EventCreated
			if fn(sub, stale) && ordered && !stale {
				sub.EventCreated = created
			}
			sub.UpdatedAt = now
			return nil
		}, &out)
	})
	if errors.Is(err, errForeign) {
		// The event id stays recorded (its transaction is rolled back, so
		// record it again): a retry is answered the same way at once.
		_ = s.update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketBillingEvents).Put([]byte(eventID), itob(uint64(now.Unix())))
		})
		return false, ErrForeignCustomer
	}
	if err != nil {
		return false, fmt.Errorf("store: apply provider event %q to company %d: %w", eventID, companyID, err)
	}
	return applied, nil
}

var errForeign = errors.New("foreign customer")

// CompanyByCustomer finds the company a provider customer id was stored for.
func (s *Store) CompanyByCustomer(customerID string) (companyID uint64, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketCustomers).Get([]byte(customerID)); len(v) == 8 {
			companyID, found = btoi(v), true
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: company of customer %q: %w", customerID, err)
	}
	return companyID, found, nil
}

// PruneBillingEvents forgets the ids of the provider's events applied
// before cutoff (the server keeps them longer than the provider resends an
// event), so the record of applied events does not grow for ever.
func (s *Store) PruneBillingEvents(cutoff time.Time) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		n, err = deleteWhere(tx.Bucket(bucketBillingEvents), func(_, v []byte) (bool, error) {
			return len(v) == 8 && int64(btoi(v)) < cutoff.Unix(), nil
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune billing events: %w", err)
	}
	return n, nil
}
