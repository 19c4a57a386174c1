package boltstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// The daily storage budget: what one company may add to the store per
// calendar day (UTC), so that one tenant - a phone flooding inbound frames,
// a script looping on sends - cannot fill the disk every tenant shares. The
// bytes are counted in the transaction of the write they pay for, in one
// small counter per company and day; a write that would go over is refused
// whole and changes nothing.

var bucketCompanyUsage = []byte("company_usage") // company id + UTC day number -> bytes added that day

// dayOf numbers UTC days since 1970-01-01.
func dayOf(t time.Time) uint64 { return uint64(t.Unix() / 86400) }

// charge adds cost to the company's bytes of now's day, or refuses with a
// *BudgetError when that would go over the store's daily budget, having
// written nothing: callers refuse before their first write, so a refusal
// never fails the group-commit batch it shares. It counts even without a
// budget, so the figure is there for the operator.
func (s *Store) charge(tx *bolt.Tx, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(tx, companyID, now, cost, s.dailyBudget)
}

// chargeOptOut is charge for an entry of the opt-out list, which may take
// the day past the budget by store.OptOutOverdraft: a STOP must stop the
// sends already accepted however much the company stored today.
func (s *Store) chargeOptOut(tx *bolt.Tx, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(tx, companyID, now, cost, s.dailyBudget+store.OptOutOverdraft(s.dailyBudget))
}

// chargeAfter counts what follows a write the budget already admitted (an
// inbound message's webhook event) without refusing it: refusing the event
// alone would lose the push of a stored message, and undoing the message
// would fail the whole batch. So the budget may be overshot by one event,
// and the company's next message is refused.
func (s *Store) chargeAfter(tx *bolt.Tx, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(tx, companyID, now, cost, 0)
}

// addUsage counts cost on the company's day, refusing it when that would
// take the day past limit bytes (0: never refused; the store's budget is 0
// without one).
func (s *Store) addUsage(tx *bolt.Tx, companyID uint64, now time.Time, cost int64, limit int64) error {
	b := tx.Bucket(bucketCompanyUsage)
	key := pair(companyID, dayOf(now))
	var used int64
	if v := b.Get(key); len(v) == 8 {
		used = int64(btoi(v))
	}
	if limit > 0 && used+cost > limit {
		return &BudgetError{CompanyID: companyID, Limit: s.dailyBudget, Used: used, Cost: cost, Reset: NextDay(now)}
	}
	return b.Put(key, itob(uint64(used+cost)))
}

// StorageUsed is how many bytes the company has added on t's UTC day.
func (s *Store) StorageUsed(companyID uint64, t time.Time) (int64, error) {
	var used int64
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketCompanyUsage).Get(pair(companyID, dayOf(t))); len(v) == 8 {
			used = int64(btoi(v))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: storage used by company %d: %w", companyID, err)
	}
	return used, nil
}

// DailyStorageBudget is the store's budget in bytes per company and day, 0
// when there is none.
func (s *Store) DailyStorageBudget() int64 { return s.dailyBudget }
