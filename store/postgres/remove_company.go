package postgres

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
)

// RemoveCompanyStep removes, in one transaction, up to about limit rows
// of the company (store.CompanyRemoval). Each step first removes what
// lets anyone act for the company, a no-op once done: its API key is
// replaced by a value no key hashes to (the row stays until the last
// step), its users go with their refresh-token families and tokens,
// console sessions and one-time tokens, its devices (deleted
// registrations too) with their SIM counters and links, its pairing
// codes. Then it deletes up to the rest of limit rows from the tables with
// a company_id column (companyTables, read from the catalogue, so a table
// added later is emptied without a change here), a table at a time, the
// pending webhook deliveries and media first (outwardFirst), then in the
// catalogue's order, which deletes a webhook delivery before its event;
// the rows of pools and media without one (member turns, sticky entries,
// chunks) go by their foreign keys' ON DELETE CASCADE. Steps of the same
// company run one at a time (the company's row locked FOR NO KEY UPDATE,
// which no writer's KEY SHARE waits for), so two nodes that finish it at
// once each delete at most limit rows a step, and only one of them the
// company's row (Done); the other's next step is ErrNotFound. The step that finds
// no row left locks the company's row, deletes what a writer that was
// already under way stored meanwhile, and deletes the row. A company that
// is not stored is ErrNotFound.
func (s *Store) RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error) {
	limit = max(limit, 1)
	var r store.CompanyRemoval
	err := s.write(fmt.Sprintf("remove company %d", companyID), func(t *txn) error {
		r = store.CompanyRemoval{}
		var one int
		if err := t.row("SELECT 1 FROM companies WHERE id = $1", id(companyID)).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		}
		if _, err := t.exec(removalPlans); err != nil {
			return err
		}
		if err := removeCompanyCredentials(t, companyID, &r); err != nil {
			return err
		}
		// One step of the company at a time: two nodes that finish it at
		// once take turns, each step's DELETEs reading what the other's
		// left. Side by side, a DELETE that waited for rows the other step
		// deleted found none, and the step took the company for empty.
		// After the devices' locks and the credentials' (doc.go: lock
		// order); a company removed meanwhile is ErrNotFound.
		if err := t.row("SELECT 1 FROM companies WHERE id = $1 FOR NO KEY UPDATE", id(companyID)).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		}
		rows, err := t.query(companyTables)
		if err != nil {
			return err
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		outwardFirst(tables)
		left := limit
		for _, table := range tables {
			n, err := deleteSome(t, pgx.Identifier{table}.Sanitize(), "company_id = $2", left, id(companyID))
			if err != nil {
				return err
			}
			countRemoved(&r, table, n)
			if left -= n; left <= 0 {
				return nil
			}
		}
		// Nothing was left: the row, locked, then what a writer under way
		// stored since, then the row.
		if _, err := t.exec("SELECT 1 FROM companies WHERE id = $1 FOR UPDATE", id(companyID)); err != nil {
			return err
		}
		if err := removeCompanyCredentials(t, companyID, &r); err != nil {
			return err
		}
		for _, table := range tables {
			tag, err := t.exec("DELETE FROM "+pgx.Identifier{table}.Sanitize()+" WHERE company_id = $1", id(companyID))
			if err != nil {
				return err
			}
			countRemoved(&r, table, int(tag.RowsAffected()))
		}
		if tag, err := t.exec("DELETE FROM companies WHERE id = $1", id(companyID)); err != nil {
			return err
		} else if tag.RowsAffected() != 1 {
			return store.ErrNotFound // removed by another step: Done is the other's
		}
		r.Done = true
		return nil
	})
	if err != nil {
		return store.CompanyRemoval{}, fmt.Errorf("store: remove company %d: %w", companyID, err)
	}
	return r, nil
}

// removalPlans makes the statements after it in a company's removal step
// read each table through an index (every table with a company_id column
// has one that leads with it, migrations/0022_company_indexes.sql), never
// by a scan of the whole table. A step deletes a batch from each table in
// turn, and from the second step on the tables before the one it reaches
// are empty of the company; but the planner's statistics, taken before the
// removal, still count the company's rows, so it expected a scan to meet
// a batch of them within its first pages and chose one, which then read
// every other company's rows to the end of the table, in every step
// (TestRemovalStepsReadNoOtherCompany; docs/performance.md, "Removing a
// company on PostgreSQL"). It holds to the step's end (set_config's
// is_local).
const removalPlans = "SELECT set_config('enable_seqscan', 'off', true)"

// companyOpen refuses, with store.ErrNotFound, a write under a company
// that is not stored (one removed, RemoveCompanyStep) or is closing
// (MarkCompanyClosing): for the records whose table has no foreign key to
// companies and that nothing else ties to a live device, user or number
// (an opt-out, a company mail), for those an API request writes whose
// foreign key would otherwise fail as a database error (a webhook set, a
// pairing code: 404, not 500), and for all of them under a company going,
// by a request that checked its credential before the removal's first
// step took it. It takes the company's row KEY SHARE, as a foreign key's
// check would, so the removal's last step, which locks the row FOR
// UPDATE, waits for the write and then deletes what it stored, or comes
// first and the write finds no row; the mark, written under FOR UPDATE
// too, is seen by a write that waited for it.
func companyOpen(t *txn, companyID uint64) error {
	var closing bool
	err := t.row("SELECT rec ? 'closing_at' FROM companies WHERE id = $1 FOR KEY SHARE", id(companyID)).Scan(&closing)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("company %d: %w", companyID, store.ErrNotFound)
	case err != nil:
		return err
	case closing:
		return fmt.Errorf("company %d is closing: %w", companyID, store.ErrNotFound)
	}
	return nil
}

// userStored refuses, with store.ErrNotFound, a sign-in record (a refresh
// family, a console session, an e-mailed link) of a user who is not
// stored, none of whose tables has a foreign key to users, or whose
// company is closing (MarkCompanyClosing: none begins then, though the
// removal's first step has not taken the users yet, or failed). It takes the
// user's row KEY SHARE, so a company's removal, which locks its users FOR
// UPDATE before it deletes their sessions and tokens
// (removeCompanyCredentials), deletes what a sign-in that came first
// stored, or the sign-in finds no user.
func userStored(t *txn, userID uint64) error {
	var closing bool
	err := t.row(`SELECT c.rec ? 'closing_at' FROM users u JOIN companies c ON c.id = u.company_id
		WHERE u.id = $1 FOR KEY SHARE OF u`, id(userID)).Scan(&closing)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("user %d: %w", userID, store.ErrNotFound)
	case err != nil:
		return err
	case closing:
		return fmt.Errorf("user %d: the company is closing: %w", userID, store.ErrNotFound)
	}
	return nil
}

// removeCompanyCredentials removes the company's API key (replaced in its
// row, which the last step deletes), users with their sessions and
// tokens, devices with their SIM counters and links, and pairing codes:
// one round trip. The devices are locked first, in id order, before the
// company's row, as a registration and a device's deletion take them
// (doc.go: lock order), then the users, in id order, after the company's
// row, as the prune of an abandoned sign-up takes its owner.
func removeCompanyCredentials(t *txn, companyID uint64, r *store.CompanyRemoval) error {
	c := id(companyID)
	add := func(n *int64) func(pgconn.CommandTag) error {
		return func(tag pgconn.CommandTag) error {
			*n += tag.RowsAffected()
			return nil
		}
	}
	b := &pgx.Batch{}
	b.Queue("SELECT id FROM devices WHERE company_id = $1 ORDER BY id FOR UPDATE", c)
	b.Queue(`UPDATE companies SET api_key_hash = convert_to('removed company ' || id, 'UTF8')
		WHERE id = $1 AND api_key_hash <> convert_to('removed company ' || id, 'UTF8')`, c)
	// The users, locked before their sessions and tokens are read: a
	// sign-in that holds one (userStored) commits what it stores first.
	b.Queue("SELECT id FROM users WHERE company_id = $1 ORDER BY id FOR UPDATE", c)
	b.Queue(`DELETE FROM refresh_tokens WHERE family IN (SELECT f.family FROM token_families f
		JOIN users u ON u.id = f.user_id WHERE u.company_id = $1)`, c).Exec(add(&r.Records))
	b.Queue("DELETE FROM token_families WHERE user_id IN (SELECT id FROM users WHERE company_id = $1)", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM console_sessions WHERE user_id IN (SELECT id FROM users WHERE company_id = $1)", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM one_time_tokens WHERE (rec->>'user_id')::bigint IN (SELECT id FROM users WHERE company_id = $1)", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM users WHERE company_id = $1", c).Exec(add(&r.Users))
	b.Queue("DELETE FROM sim_usage WHERE device_id IN (SELECT id FROM devices WHERE company_id = $1)", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM sim_recipients WHERE device_id IN (SELECT id FROM devices WHERE company_id = $1)", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM device_links WHERE device_id IN (SELECT id FROM devices WHERE company_id = $1)", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM devices WHERE company_id = $1 AND deleted_at IS NULL", c).Exec(add(&r.Devices))
	b.Queue("DELETE FROM devices WHERE company_id = $1", c).Exec(add(&r.Records))
	b.Queue("DELETE FROM pairings WHERE company_id = $1", c).Exec(add(&r.Records))
	return t.sendBatch(b)
}

// outwardFirst puts first, in place, the tables of what leaves the server
// without a credential of the company: its pending webhook deliveries
// (the workers send them) and its media files (signed links serve them),
// so they go with the removal's first step rather than after the many
// steps of a large company's messages. The rest keep the catalogue's
// order, which deletes a delivery before its event.
func outwardFirst(tables []string) {
	rank := func(t string) int {
		switch t {
		case "webhook_deliveries":
			return 0
		case "media":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(tables, func(a, b string) int { return rank(a) - rank(b) })
}

// countRemoved adds n rows removed from table to r.
func countRemoved(r *store.CompanyRemoval, table string, n int) {
	if table == "messages" {
		r.Messages += int64(n)
	} else {
		r.Records += int64(n)
	}
}

// MarkCompanyClosing marks the company closing (store.Company.ClosingAt)
// under the company's row lock, in one transaction with vet's look at its
// record and subscription: a subscription write takes the same lock
// (lockSubscription) and, after the mark, finds the company closing and is
// ErrNotFound, so nothing vet refused (a checkout claim, a live
// subscription) is taken between the look and the mark. A company already
// closing is answered as it is, without vet. A company that is not stored
// is ErrNotFound.
func (s *Store) MarkCompanyClosing(companyID uint64, now time.Time, vet store.RemovalVet) (store.Company, error) {
	var c store.Company
	err := s.write(fmt.Sprintf("mark company %d closing", companyID), func(t *txn) error {
		c = store.Company{}
		if err := getRec(t, &c, "SELECT rec FROM companies WHERE id = $1 FOR UPDATE", id(companyID)); err != nil {
			return err
		}
		if !c.ClosingAt.IsZero() {
			return nil
		}
		sub := store.Subscription{CompanyID: companyID}
		found := true
		switch err := getRec(t, &sub, "SELECT rec FROM subscriptions WHERE company_id = $1", id(companyID)); {
		case errors.Is(err, store.ErrNotFound):
			found = false
		case err != nil:
			return err
		}
		if err := vet(c, sub, found); err != nil {
			return err
		}
		c.ClosingAt = now.UTC()
		raw, err := rec(c)
		if err != nil {
			return err
		}
		_, err = t.exec("UPDATE companies SET rec = $2 WHERE id = $1", id(companyID), raw)
		return err
	})
	if err != nil {
		return store.Company{}, err
	}
	return c, nil
}

// ClosingCompanies lists the companies marked closing
// (MarkCompanyClosing) whose removal is not finished, oldest first.
func (s *Store) ClosingCompanies() ([]uint64, error) {
	var ids []uint64
	err := s.read("closing companies", func(t *txn) error {
		ids = nil
		rows, err := t.query("SELECT id FROM companies WHERE rec ? 'closing_at' ORDER BY id")
		if err != nil {
			return err
		}
		n, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, v := range n {
			ids = append(ids, uint64(v))
		}
		return err
	})
	return ids, err
}
