package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ApplyProviderEvent applies one payment-provider event to a company's
// subscription, at most once per event id: a retried delivery finds the id
// recorded and changes nothing (applied false). created is the event's
// creation time (unix s); fn is told stale when the subscription already
// holds a newer event's state, so it may record identities (customer,
// subscription id) but must leave the state alone. A company that does not
// exist is ErrNotFound and records nothing.
func (s *Store) ApplyProviderEvent(eventID string, companyID uint64, created int64, now time.Time, fn func(sub *Subscription, stale bool)) (applied bool, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketCompanies).Get(itob(companyID)) == nil {
			return ErrNotFound
		}
		events := tx.Bucket(bucketBillingEvents)
		if events.Get([]byte(eventID)) != nil {
			return nil
		}
		if err := events.Put([]byte(eventID), itob(uint64(now.Unix()))); err != nil {
			return err
		}
		applied = true
		var out Subscription
		return updateSubscriptionTx(tx, companyID, func(sub *Subscription) error {
			stale := created < sub.EventCreated
			fn(sub, stale)
			if !stale {
				sub.EventCreated = created
			}
			sub.UpdatedAt = now
			return nil
		}, &out)
	})
	if err != nil {
		return false, fmt.Errorf("store: apply provider event %q to company %d: %w", eventID, companyID, err)
	}
	return applied, nil
}

// CompanyByCustomer finds the company a provider customer id was stored for.
func (s *Store) CompanyByCustomer(customerID string) (companyID uint64, found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
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
