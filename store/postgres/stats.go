package postgres

import (
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// The analytics and the dashboard read the message counters that writes
// count (count, core.go) in stats_days, split in shards, and the sums that
// triggers keep of them (migrations/0007_stats.sql): a company's days
// (stats_company_days), its devices' days (stats_device_days) and its
// users' days on each device (stats_user_days). Each question reads the
// rows it needs:
//
//   - no filter: the devices' day sums, which give the series and the
//     totals too; under NoDevices, the company's day sums alone;
//   - a devices filter: those devices' counters (index stats_days_device);
//   - a users filter: those users' day sums on each device;
//   - the all-time totals and the dashboard: the company's day sums.
//
// Where this differs from the embedded store:
//   - Generation moves with every transaction of the database server that
//     ends, this store's or not (see Generation): the API's kept answers are
//     dropped more often, never served stale.
//   - RecordsRead counts the rows summed (counters or sums), not records.
//   - StatsDevices lists every registration the company ever had: a deleted
//     device keeps its row. The embedded store lists those paired or counted
//     since its counters exist, which for a store made today is the same.
//   - The sums are kept by triggers, not by the code that counts, so that
//     whatever writes counters (a copy of an embedded store too) sums them.
//   - The newest events come in the order they were written (activity.seq),
//     which two transactions that commit at once may not share with their
//     commits; the embedded store's single writer has no such two.

// countsCols are the counter columns of the counter and sum tables, summed
// (zero over no rows).
const countsCols = "coalesce(sum(sent), 0)::bigint, coalesce(sum(delivered), 0)::bigint, coalesce(sum(failed), 0)::bigint, " +
	"coalesce(sum(received), 0)::bigint, coalesce(sum(expired), 0)::bigint, coalesce(sum(segments), 0)::bigint"

// scanCounts scans the six sums of countsCols, then the rest of dest.
func scanCounts(row pgx.Row, c *store.Counts, dest ...any) error {
	var n [6]int64
	if err := row.Scan(append([]any{&n[0], &n[1], &n[2], &n[3], &n[4], &n[5]}, dest...)...); err != nil {
		return err
	}
	*c = store.Counts{Sent: uint64(n[0]), Delivered: uint64(n[1]), Failed: uint64(n[2]), Received: uint64(n[3]), Expired: uint64(n[4]), Segments: uint64(n[5])}
	return nil
}

// ids lists the ids a filter matches (those set true), as bigints.
func ids(set map[uint64]bool) []int64 {
	out := make([]int64, 0, len(set))
	for v, ok := range set {
		if ok {
			out = append(out, id(v))
		}
	}
	slices.Sort(out)
	return out
}

// Stats sums the company's counters over a range of days (see above for
// what each question reads).
func (s *Store) Stats(q store.StatsQuery) (store.Stats, error) {
	out := store.Stats{ByDevice: map[uint64]store.Counts{}}
	if q.To < q.From {
		return out, nil
	}
	if q.To-q.From >= store.MaxStatsDays {
		return out, fmt.Errorf("store: stats over %d days, more than %d", q.To-q.From+1, store.MaxStatsDays)
	}
	out.Days = make([]store.Counts, q.To-q.From+1)
	users, devices := ids(q.Users), ids(q.Devices)
	if (q.Users != nil && len(users) == 0) || (q.Devices != nil && len(devices) == 0) {
		return out, nil // an empty filter matches nothing
	}
	byDevice := !q.NoDevices
	var sql string
	args := []any{id(q.CompanyID), int32(q.From), int32(q.To)}
	switch {
	case q.Users != nil:
		sql = "FROM stats_user_days WHERE company_id = $1 AND user_id = ANY($4) AND day BETWEEN $2 AND $3"
		args = append(args, users)
		if q.Devices != nil {
			sql += " AND device_id = ANY($5)"
			args = append(args, devices)
		}
	case q.Devices != nil:
		sql = "FROM stats_days WHERE company_id = $1 AND device_id = ANY($4) AND day BETWEEN $2 AND $3"
		args = append(args, devices)
	case byDevice:
		sql = "FROM stats_device_days WHERE company_id = $1 AND day BETWEEN $2 AND $3"
	default:
		sql = "FROM stats_company_days WHERE company_id = $1 AND day BETWEEN $2 AND $3"
	}
	if byDevice {
		sql = "SELECT " + countsCols + ", count(*), day, device_id " + sql + " GROUP BY day, device_id"
	} else {
		sql = "SELECT " + countsCols + ", count(*), day, 0::bigint " + sql + " GROUP BY day"
	}
	err := s.read(fmt.Sprintf("stats of company %d", q.CompanyID), func(t *txn) error {
		out.Totals, out.RecordsRead = store.Counts{}, 0
		clear(out.Days)
		clear(out.ByDevice)
		rows, err := t.query(sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n store.Counts
			var read, dev int64
			var d int32
			if err := scanCounts(rows, &n, &read, &d, &dev); err != nil {
				return err
			}
			out.RecordsRead += int(read)
			if n.IsZero() { // sums of counters since removed
				continue
			}
			out.Totals.Add(n)
			out.Days[uint32(d)-q.From].Add(n)
			if byDevice {
				c := out.ByDevice[uint64(dev)]
				c.Add(n)
				out.ByDevice[uint64(dev)] = c
			}
		}
		return rows.Err()
	})
	if err != nil {
		return store.Stats{}, err
	}
	return out, nil
}

// StatsTotals is the company's all-time counters: the sum of its days.
func (s *Store) StatsTotals(companyID uint64) (store.Counts, error) {
	var c store.Counts
	err := s.read(fmt.Sprintf("stats totals of company %d", companyID), func(t *txn) error {
		return scanCounts(t.row("SELECT "+countsCols+" FROM stats_company_days WHERE company_id = $1", id(companyID)), &c)
	})
	if err != nil {
		return store.Counts{}, err
	}
	return c, nil
}

// StatsDevices lists every registration of the company (deleted ones
// too: their rows stay), in id order, with the name each had when last
// written; a deleted one is not live.
func (s *Store) StatsDevices(companyID uint64) ([]store.StatsDevice, error) {
	var out []store.StatsDevice
	err := s.read(fmt.Sprintf("counted devices of company %d", companyID), func(t *txn) error {
		out = nil
		rows, err := t.query(`SELECT id, fingerprint, coalesce(rec->>'name', ''), deleted_at IS NULL
			FROM devices WHERE company_id = $1 ORDER BY id`, id(companyID))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d store.StatsDevice
			var devID int64
			if err := rows.Scan(&devID, &d.Fingerprint, &d.Name, &d.Live); err != nil {
				return err
			}
			d.ID = uint64(devID)
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DashboardSummary reads the dashboard's figures in one snapshot: the
// all-time counters and the segments sent on the UTC days from from's day
// up to, not including, to's day (one walk of the company's day sums), the
// live devices not disabled, and the newest recent events, at most limit.
func (s *Store) DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error) {
	var out store.Summary
	limit = max(min(limit, store.ActivityKeep), 0)
	err := s.read(fmt.Sprintf("dashboard of company %d", companyID), func(t *txn) error {
		out = store.Summary{}
		var period int64
		if err := scanCounts(t.row("SELECT "+countsCols+", coalesce(sum(segments) FILTER (WHERE day >= $2 AND day < $3), 0)::bigint FROM stats_company_days WHERE company_id = $1",
			id(companyID), day(from), day(to)), &out.Totals, &period); err != nil {
			return err
		}
		out.PeriodSegments = uint64(period)
		if err := t.row(`SELECT count(*) FROM devices WHERE company_id = $1 AND deleted_at IS NULL AND rec->>'status' IS DISTINCT FROM $2`,
			id(companyID), store.DeviceDisabled).Scan(&out.ActiveDevices); err != nil {
			return err
		}
		var err error
		out.Recent, err = getRecs[store.Activity](t, "SELECT rec FROM activity WHERE company_id = $1 ORDER BY seq DESC LIMIT $2", id(companyID), limit)
		return err
	})
	if err != nil {
		return store.Summary{}, err
	}
	return out, nil
}

// Generation rises each time a transaction of the database server ends
// (commits or rolls back): it is the number of transaction ids below the
// newest snapshot's horizon that are no longer running. Reads made while
// it stays the same see the same data: an answer computed from reads that
// all began after Generation returned g holds for as long as Generation
// still returns g. Unlike the embedded store's, it also moves with writes
// the answer does not see (another database of the same server), which
// costs a cached answer, never a stale one.
//
// Why it holds: a snapshot's transactions below xmax are either running
// (xip) or ended, and an ended transaction never runs again, so the count
// of ended ones never falls and grows by one at least with every commit
// that becomes visible; a commit of a transaction at or past xmax moves
// xmax past it. Equal counts at two snapshots mean no commit became
// visible between them. It is one statement outside a transaction: the
// API asks it before every analytics answer, kept or not.
func (s *Store) Generation() (uint64, error) {
	var g int64
	ctx, cancel := s.bounded()
	defer cancel()
	err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(snap)::text::bigint - (SELECT count(*) FROM pg_snapshot_xip(snap))
		FROM pg_current_snapshot() AS snap`).Scan(&g)
	if err != nil {
		return 0, fmt.Errorf("store: generation: %w", s.closed(err))
	}
	return uint64(g), nil
}

// Version is the schema version of the database: the highest migration
// applied.
func (s *Store) Version() (uint64, error) {
	ctx, cancel := s.bounded()
	defer cancel()
	v, err := schemaVersion(ctx, s.pool)
	if err != nil {
		return 0, fmt.Errorf("store: schema version: %w", s.closed(err))
	}
	return uint64(v), nil
}
