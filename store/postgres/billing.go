package postgres

import (
	"errors"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Billing: one subscription per company (the core's subscriptions table,
// whose customer_id binds a payment provider's customer to one company)
// and the provider's events already applied (billing_events), so a
// retried event is applied once. A company's subscription changes under
// the company's row lock: fn reads and writes it with no other change in
// between, and the binding of a customer is checked and made in the same
// transaction.
//
// Versus the embedded store: a customer is found by the subscription that
// holds it now (bbolt keeps an index entry for every customer a company
// ever held), and a change that would give a second company a customer
// another one holds is store.ErrConflict (bbolt moved the index entry).

// Subscription returns the company's stored subscription; found is false
// before the first change of plan.
func (s *Store) Subscription(companyID uint64) (sub store.Subscription, found bool, err error) {
	err = s.read(fmt.Sprintf("subscription of company %d", companyID), func(t *txn) error {
		sub, found = store.Subscription{}, false
		err := getRec(t, &sub, "SELECT rec FROM subscriptions WHERE company_id = $1", id(companyID))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return store.Subscription{}, false, err
	}
	if !found {
		return store.Subscription{CompanyID: companyID}, false, nil
	}
	return sub, true, nil
}

// UpdateSubscription changes the company's subscription in one transaction;
// fn gets the stored one (or a zero one with CompanyID set). A company that
// does not exist, or is closing (MarkCompanyClosing), is ErrNotFound.
func (s *Store) UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error) {
	var out store.Subscription
	err := s.write(fmt.Sprintf("update subscription of company %d", companyID), func(t *txn) error {
		sub, err := lockSubscription(t, companyID)
		if err != nil {
			return err
		}
		if err := fn(&sub); err != nil {
			return err
		}
		out = sub
		return putSubscription(t, companyID, &out)
	})
	if err != nil {
		return out, err
	}
	return out, nil
}

// lockSubscription takes the company's row lock and reads its subscription
// (a zero one with CompanyID set before the first change). A company that
// does not exist, or is closing (MarkCompanyClosing, which marks it under
// the same lock), is ErrNotFound.
func lockSubscription(t *txn, companyID uint64) (store.Subscription, error) {
	var closing bool
	err := t.row("SELECT rec ? 'closing_at' FROM companies WHERE id = $1 FOR UPDATE", id(companyID)).Scan(&closing)
	if err != nil {
		return store.Subscription{}, mapErr(err)
	}
	if closing {
		return store.Subscription{}, fmt.Errorf("company %d is closing: %w", companyID, store.ErrNotFound)
	}
	sub := store.Subscription{CompanyID: companyID}
	err = getRec(t, &sub, "SELECT rec FROM subscriptions WHERE company_id = $1", id(companyID))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return sub, err
	}
	return sub, nil
}

// putSubscription stores the company's subscription, binding its customer.
func putSubscription(t *txn, companyID uint64, sub *store.Subscription) error {
	sub.CompanyID = companyID
	raw, err := rec(sub)
	if err != nil {
		return err
	}
	var customer *string
	if sub.CustomerID != "" {
		customer = &sub.CustomerID
	}
	_, err = t.exec(`INSERT INTO subscriptions (company_id, customer_id, rec) VALUES ($1, $2, $3)
		ON CONFLICT (company_id) DO UPDATE SET customer_id = EXCLUDED.customer_id, rec = EXCLUDED.rec`,
		id(companyID), customer, raw)
	return err
}

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
// does the event become the newest. A company that does not exist, or is
// closing, is ErrNotFound and records nothing.
func (s *Store) ApplyProviderEvent(eventID string, companyID uint64, customer string, created int64, ordered bool, now time.Time, fn func(sub *store.Subscription, stale bool) bool) (applied bool, err error) {
	var foreign bool
	err = s.write(fmt.Sprintf("apply provider event %q to company %d", eventID, companyID), func(t *txn) error {
		applied, foreign = false, false
		sub, err := lockSubscription(t, companyID)
		if err != nil {
			return err
		}
		// A delivery of the same event at once waits here for the first
		// to commit, then finds its id.
		tag, err := t.exec("INSERT INTO billing_events (event_id, applied_at) VALUES ($1, $2) ON CONFLICT DO NOTHING", eventID, now)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if customer != "" {
			var holder int64
			err := t.row("SELECT company_id FROM subscriptions WHERE customer_id = $1", customer).Scan(&holder)
			if err == nil && uint64(holder) != companyID || sub.CustomerID != "" && sub.CustomerID != customer {
				foreign = true // commit the event's id alone: a retry is acknowledged at once
				return nil
			}
			if err != nil && !errors.Is(mapErr(err), store.ErrNotFound) {
				return err
			}
			sub.CustomerID = customer
		}
		stale := ordered && created < sub.EventCreated
		if fn(&sub, stale) && ordered && !stale {
			sub.EventCreated = created
		}
		sub.UpdatedAt = now
		err = putSubscription(t, companyID, &sub)
		if errors.Is(mapErr(err), store.ErrConflict) {
			// Another company's event bound the customer since the read:
			// read again, and refuse it as foreign.
			return errAgain
		}
		applied = err == nil
		return err
	})
	if err != nil {
		return false, err
	}
	if foreign {
		return false, store.ErrForeignCustomer
	}
	return applied, nil
}

// CompanyByCustomer finds the company whose subscription holds the
// provider's customer id.
func (s *Store) CompanyByCustomer(customerID string) (companyID uint64, found bool, err error) {
	err = s.read(fmt.Sprintf("company of customer %q", customerID), func(t *txn) error {
		var cid int64
		err := t.row("SELECT company_id FROM subscriptions WHERE customer_id = $1", customerID).Scan(&cid)
		companyID, found = uint64(cid), err == nil
		if errors.Is(mapErr(err), store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return companyID, found, nil
}

// PruneBillingEvents forgets the ids of the provider's events applied
// before cutoff (the server keeps them longer than the provider resends an
// event), so the record of applied events does not grow for ever.
func (s *Store) PruneBillingEvents(cutoff time.Time) (int, error) {
	// No index on applied_at: the table holds a few weeks of the
	// provider's events, and each batch's scan stops at its limit.
	return s.pruneBatches("prune billing events", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "billing_events", "applied_at < $2", limit, cutoff)
	})
}
