package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Billing records: one subscription per company, the messages it has queued
// in each billing period (counted in the enqueue transaction, so a limit is
// exact under concurrency and never needs a scan), and the payment
// provider's events already applied (so a retried event is applied once).

var (
	bucketSubscriptions = []byte("subscriptions")    // company id -> Subscription
	bucketPlanUsage     = []byte("plan_usage")       // company id + period start (unix s) -> messages queued
	bucketBillingEvents = []byte("billing_events")   // provider event id -> unix s applied
	bucketCustomers     = []byte("billing_customer") // provider customer id -> company id
	billingBuckets      = [][]byte{bucketSubscriptions, bucketPlanUsage, bucketBillingEvents, bucketCustomers}
)

// SetPlans installs the plan rules before the store serves; without them
// nothing is limited and messages count per UTC calendar month.
func (s *Store) SetPlans(p Plans) { s.plans = p }

// usageSlot is one period's message counter, to add to once the write goes ahead.
type usageSlot struct {
	key  []byte
	used uint64
}

func (u usageSlot) add(tx *bolt.Tx) error {
	return tx.Bucket(bucketPlanUsage).Put(u.key, itob(u.used+1))
}

func (s *Store) limitsTx(tx *bolt.Tx, companyID uint64, now time.Time) (PlanLimits, error) {
	if s.plans == nil {
		from, to := store.CalendarMonth(now)
		return PlanLimits{Messages: -1, Devices: -1, PeriodStart: from, PeriodEnd: to}, nil
	}
	// The record is decoded into a Subscription on the heap (it passes
	// through an interface): only when there is one, not for every send
	// of a company without a subscription.
	raw := tx.Bucket(bucketSubscriptions).Get(itob(companyID))
	if raw == nil {
		return s.plans.Limits(Subscription{}, false, now), nil
	}
	sub := new(Subscription)
	if err := decodeRecord(raw, sub); err != nil {
		return PlanLimits{}, err
	}
	return s.plans.Limits(*sub, true, now), nil
}

// planAllows refuses with a *PlanLimitError, having written nothing, when
// one more message (or device) would go over the company's plan; for a
// message it returns the counter to add to once the message is stored.
func (s *Store) planAllows(tx *bolt.Tx, companyID uint64, now time.Time, what string) (usageSlot, error) {
	l, err := s.limitsTx(tx, companyID, now)
	if err != nil {
		return usageSlot{}, err
	}
	if what == store.LimitDevices {
		if l.Devices < 0 {
			return usageSlot{}, nil
		}
		if n := countDevicesTx(tx, companyID); int64(n) >= l.Devices {
			return usageSlot{}, &PlanLimitError{What: what, Limit: l.Devices}
		}
		return usageSlot{}, nil
	}
	u := usageSlot{key: pair(companyID, uint64(l.PeriodStart.Unix()))}
	if v := tx.Bucket(bucketPlanUsage).Get(u.key); len(v) == 8 {
		u.used = btoi(v)
	}
	if l.Messages >= 0 && int64(u.used) >= l.Messages {
		return u, &PlanLimitError{What: what, Limit: l.Messages, PeriodEnd: l.PeriodEnd, Used: int64(u.used), Asked: 1}
	}
	return u, nil
}

func countDevicesTx(tx *bolt.Tx, companyID uint64) int {
	prefix := itob(companyID)
	n := 0
	c := tx.Bucket(bucketCompanyDeviceIDs).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// Usage is what a company has used of its plan: messages queued in the
// period starting at periodStart, and its live devices.
func (s *Store) Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketPlanUsage).Get(pair(companyID, uint64(periodStart.Unix()))); len(v) == 8 {
			messages = int64(btoi(v))
		}
		devices = countDevicesTx(tx, companyID)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: usage of company %d: %w", companyID, err)
	}
	return messages, devices, nil
}

// Subscription returns the company's stored subscription; found is false
// before the first change of plan.
func (s *Store) Subscription(companyID uint64) (sub Subscription, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketSubscriptions), itob(companyID), &sub)
	})
	if errors.Is(err, ErrNotFound) {
		return Subscription{CompanyID: companyID}, false, nil
	}
	if err != nil {
		return sub, false, fmt.Errorf("store: subscription of company %d: %w", companyID, err)
	}
	return sub, true, nil
}

// UpdateSubscription changes the company's subscription in one transaction;
// fn gets the stored one (or a zero one with CompanyID set). A company that
// does not exist, or is closing (MarkCompanyClosing), is ErrNotFound.
func (s *Store) UpdateSubscription(companyID uint64, fn func(*Subscription) error) (Subscription, error) {
	var out Subscription
	err := s.update(func(tx *bolt.Tx) error {
		if err := companyOpen(tx, companyID); err != nil {
			return err
		}
		return updateSubscriptionTx(tx, companyID, fn, &out)
	})
	if err != nil {
		return out, fmt.Errorf("store: update subscription of company %d: %w", companyID, err)
	}
	return out, nil
}

func updateSubscriptionTx(tx *bolt.Tx, companyID uint64, fn func(*Subscription) error, out *Subscription) error {
	b := tx.Bucket(bucketSubscriptions)
	sub := Subscription{CompanyID: companyID}
	if err := getJSON(b, itob(companyID), &sub); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err := fn(&sub); err != nil {
		return err
	}
	sub.CompanyID = companyID
	if sub.CustomerID != "" {
		if err := tx.Bucket(bucketCustomers).Put([]byte(sub.CustomerID), itob(companyID)); err != nil {
			return err
		}
	}
	*out = sub
	return putJSON(b, itob(companyID), sub)
}
