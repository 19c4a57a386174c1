package postgres

// What a company has used: its bytes stored a day (and their counters'
// prune) and its plan's messages and devices.

import (
	"time"
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
	var n int
	err := s.write("prune storage counters", func(t *txn) error {
		return t.row(`WITH gone AS (DELETE FROM storage_usage WHERE day < $1 RETURNING company_id, day)
			SELECT count(*) FROM (SELECT DISTINCT company_id, day FROM gone) d`, day(cutoff)).Scan(&n)
	})
	return n, err
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
