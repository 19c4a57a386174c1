package postgres

// What a company has used: its bytes stored a day (and their counters'
// prune) and its plan's messages and devices, and the checks and writes
// that count a send or a device against them.

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// StorageUsed is how many bytes the company has added on t's UTC day.
func (s *Store) StorageUsed(companyID uint64, t time.Time) (int64, error) {
	var used int64
	err := s.read("storage used", func(tx *txn) error {
		return tx.row("SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $2", id(companyID), day(t)).Scan(&used)
	})
	return used, err
}

// PruneStorageCounters drops the daily storage counters of UTC days before
// the one of cutoff (only today's is ever consulted) and says how many
// company days it dropped, whatever the shards they were split in.
func (s *Store) PruneStorageCounters(cutoff time.Time) (int, error) {
	// Batch by company day (limit of them a batch), all of its shards
	// together, so that no day is counted in two batches. Only today's
	// counters are written, so the days deleted gain no shard meanwhile.
	return s.pruneBatches("prune storage counters", func(t *txn, limit int) (int, error) {
		var n int
		err := t.row(`WITH days AS (SELECT DISTINCT company_id, day FROM storage_usage WHERE day < $2 LIMIT $1),
			gone AS (DELETE FROM storage_usage u USING days d WHERE u.company_id = d.company_id AND u.day = d.day RETURNING u.company_id, u.day)
			SELECT count(*) FROM (SELECT DISTINCT company_id, day FROM gone) g`, limit, day(cutoff)).Scan(&n)
		return n, err
	})
}

// Usage is what a company has used of its plan: messages queued in the
// period starting at periodStart, and its live devices.
func (s *Store) Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error) {
	err = s.read("usage", func(t *txn) error {
		if err := t.row("SELECT coalesce(sum(used), 0) FROM plan_usage WHERE company_id = $1 AND period_start = $2",
			id(companyID), periodStart).Scan(&messages); err != nil {
			return err
		}
		return t.row("SELECT count(*) FROM devices WHERE company_id = $1 AND deleted_at IS NULL", id(companyID)).Scan(&devices)
	})
	if err != nil {
		return 0, 0, err
	}
	return messages, devices, nil
}

// charge adds cost to the company's bytes of now's day, or refuses with a
// *store.BudgetError when that would go over the daily budget, having
// written nothing. The bytes are written as the transaction's last
// statement (txn.chargeStorage). The check reads the day's shards without locking them,
// so writes of one company that run at the same moment may each pass it:
// the budget (a guard of the disk, not a price) can be overshot by what is
// in flight at once, at most one write per connection of the pool.
func (s *Store) charge(t *txn, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(t, companyID, now, cost, true)
}

// chargeAfter counts what follows a write the budget already admitted (an
// inbound message's webhook event) without refusing it.
func (s *Store) chargeAfter(t *txn, companyID uint64, now time.Time, cost int64) error {
	return s.addUsage(t, companyID, now, cost, false)
}

// chargeOptOut is charge for an entry of the opt-out list, which may take
// the day past the budget by store.OptOutOverdraft: a STOP must stop the
// sends already accepted however much the company stored today.
func (s *Store) chargeOptOut(t *txn, companyID uint64, now time.Time, cost int64) error {
	if s.dailyBudget <= 0 {
		return s.addUsed(t, companyID, now, cost, 0, false)
	}
	var used int64
	if err := t.row("SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $2", id(companyID), day(now)).Scan(&used); err != nil {
		return err
	}
	if used+cost > s.dailyBudget+store.OptOutOverdraft(s.dailyBudget) {
		return &store.BudgetError{CompanyID: companyID, Limit: s.dailyBudget, Used: used, Cost: cost, Reset: store.NextDay(now)}
	}
	return s.addUsed(t, companyID, now, cost, used, false)
}

func (s *Store) addUsage(t *txn, companyID uint64, now time.Time, cost int64, mayRefuse bool) error {
	var used int64
	if mayRefuse && s.dailyBudget > 0 {
		if err := t.row("SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $2", id(companyID), day(now)).Scan(&used); err != nil {
			return err
		}
	}
	return s.addUsed(t, companyID, now, cost, used, mayRefuse)
}

// addUsed is addUsage for a caller that read the day's use (used) itself,
// earlier in the transaction. What the transaction charged already is not
// written yet (txn.chargeStorage): it is added to used here.
func (s *Store) addUsed(t *txn, companyID uint64, now time.Time, cost, used int64, mayRefuse bool) error {
	if mayRefuse {
		if err := s.overBudget(companyID, now, cost, used+t.charges[chargeKey{companyID, day(now)}]); err != nil {
			return err
		}
	}
	t.chargeStorage(companyID, day(now), cost)
	return nil
}

// overBudget refuses with a *store.BudgetError when adding cost to the
// day's use (used) would go over the daily budget.
func (s *Store) overBudget(companyID uint64, now time.Time, cost, used int64) error {
	if s.dailyBudget > 0 && used+cost > s.dailyBudget {
		return &store.BudgetError{CompanyID: companyID, Limit: s.dailyBudget, Used: used, Cost: cost, Reset: store.NextDay(now)}
	}
	return nil
}

// limits are the company's plan limits at now.
func (s *Store) limits(t *txn, companyID uint64, now time.Time) (store.PlanLimits, error) {
	if s.plans == nil {
		return s.limitsOf(nil, now)
	}
	var raw []byte
	err := t.row("SELECT rec FROM subscriptions WHERE company_id = $1", id(companyID)).Scan(&raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.PlanLimits{}, err
	}
	return s.limitsOf(raw, now)
}

// limitsOf are the plan limits at now of the company whose subscription's
// record is sub (nil: it has none).
func (s *Store) limitsOf(sub []byte, now time.Time) (store.PlanLimits, error) {
	if s.plans == nil {
		from, to := store.CalendarMonth(now)
		return store.PlanLimits{Messages: -1, Devices: -1, PeriodStart: from, PeriodEnd: to}, nil
	}
	var rec store.Subscription
	if sub != nil {
		if err := json.Unmarshal(sub, &rec); err != nil {
			return store.PlanLimits{}, err
		}
	}
	return s.plans.Limits(rec, sub != nil, now), nil
}

// usageSlot is a send's place in its company's plan usage: what the period
// has used, its limit (-1: none), and whether the count is exact (shard 0
// locked).
type usageSlot struct {
	companyID uint64
	limits    store.PlanLimits
	used      int64
}

// room refuses with a *store.PlanLimitError when n more messages would go
// over the plan.
func (u usageSlot) room(n int64) error {
	if l := u.limits; l.Messages >= 0 && u.used+n > l.Messages {
		return &store.PlanLimitError{What: store.LimitMessages, Limit: l.Messages, PeriodEnd: l.PeriodEnd, Used: u.used, Asked: n}
	}
	return nil
}

// add counts n messages queued in the slot's period.
func (u usageSlot) add(t *txn, n int64) error {
	sh := t.shard()
	if u.limits.Messages >= 0 {
		sh = 0 // the row planAllows locked
	}
	_, err := t.exec(planAddSQL, id(u.companyID), u.limits.PeriodStart, sh, n)
	return err
}

// planAddSQL adds n messages to a shard of a company's plan usage of a
// period (company, period start, shard, n).
const planAddSQL = `INSERT INTO plan_usage (company_id, period_start, shard, used) VALUES ($1, $2, $3, $4)
	ON CONFLICT (company_id, period_start, shard) DO UPDATE SET used = plan_usage.used + EXCLUDED.used`

// queueAllowAdd queues planAllowsUnder and add for n messages as one
// statement, for a send that writes in one round trip: an uncapped plan
// adds to the transaction's shard; a capped one adds to shard 0, which locks it
// (the row lockPlanUsage locks, making it for the period's first send),
// and returns the period's use, shard 0 as it stands once locked, the
// other shards as the statement's snapshot has them, as lockPlanUsage
// reads it. Going over the plan is the batch's error, a
// *store.PlanLimitError: the transaction then rolls back what it added.
func (u usageSlot) queueAllowAdd(t *txn, b *pgx.Batch, n int64) {
	if u.limits.Messages < 0 {
		b.Queue(planAddSQL, id(u.companyID), u.limits.PeriodStart, t.shard(), n)
		return
	}
	b.Queue(planAddSQL+` RETURNING plan_usage.used + (SELECT coalesce(sum(o.used), 0) FROM plan_usage o
		WHERE o.company_id = $1 AND o.period_start = $2 AND o.shard <> 0)`,
		id(u.companyID), u.limits.PeriodStart, 0, n).QueryRow(func(row pgx.Row) error {
		var total int64
		if err := row.Scan(&total); err != nil {
			return err
		}
		u.used = total - n
		return u.room(n)
	})
}

// planAllows refuses with a *store.PlanLimitError, having written nothing,
// when one more message (what = store.LimitMessages) or device
// (store.LimitDevices) would go over the company's plan. For messages it
// returns the slot to add to once the message is stored; a company whose
// plan caps its messages has its usage row locked until the transaction
// ends, so concurrent sends count exactly (an uncapped company's sends
// lock nothing). For devices it takes the company's row lock and counts.
func (s *Store) planAllows(t *txn, companyID uint64, now time.Time, what string) (usageSlot, error) {
	l, err := s.limits(t, companyID, now)
	if err != nil {
		return usageSlot{}, err
	}
	return planAllowsUnder(t, companyID, l, what)
}

// planAllowsUnder is planAllows for a caller that read the limits itself.
func planAllowsUnder(t *txn, companyID uint64, l store.PlanLimits, what string) (usageSlot, error) {
	u := usageSlot{companyID: companyID, limits: l}
	if what == store.LimitDevices {
		if l.Devices < 0 {
			return u, nil
		}
		if err := lockCompany(t, companyID); err != nil {
			return u, err
		}
		var n int64
		if err := t.row("SELECT count(*) FROM devices WHERE company_id = $1 AND deleted_at IS NULL", id(companyID)).Scan(&n); err != nil {
			return u, err
		}
		if n >= l.Devices {
			return u, &store.PlanLimitError{What: what, Limit: l.Devices}
		}
		return u, nil
	}
	if l.Messages < 0 {
		return u, nil
	}
	var err error
	if u.used, err = lockPlanUsage(t, companyID, l.PeriodStart); err != nil {
		return u, err
	}
	return u, u.room(1)
}

// lockPlanUsage takes the lock of the company's shard 0 of the period's
// plan usage (making the row for the period's first send) and reads the
// period's use, in one statement: shard 0 as it stands once locked, the
// other shards as the statement's snapshot has them. While the plan caps
// messages every send adds to shard 0 alone (usageSlot.add), so the other
// shards hold only what was sent before the cap, and the sum is exact.
func lockPlanUsage(t *txn, companyID uint64, period time.Time) (int64, error) {
	for range 2 {
		var used int64
		err := t.row(`SELECT u.used + (SELECT coalesce(sum(o.used), 0) FROM plan_usage o
				WHERE o.company_id = $1 AND o.period_start = $2 AND o.shard <> 0)
			FROM plan_usage u WHERE u.company_id = $1 AND u.period_start = $2 AND u.shard = 0 FOR UPDATE OF u`,
			id(companyID), period).Scan(&used)
		if !errors.Is(err, pgx.ErrNoRows) {
			return used, err
		}
		// The period's first send: make shard 0 (or wait for the send
		// making it), then lock it.
		if _, err := t.exec(`INSERT INTO plan_usage (company_id, period_start, shard, used) VALUES ($1, $2, 0, 0)
			ON CONFLICT DO NOTHING`, id(companyID), period); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("store: plan usage: shard 0 made but not found")
}
