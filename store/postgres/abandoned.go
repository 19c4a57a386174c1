package postgres

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// companyTables reads the tables of the schema, other than companies and
// users, with a company_id column: an abandoned sign-up has no row in any
// of them (store.AbandonedSignup). They are read from the catalogue, by
// each batch of the prune that finds a sign-up (and each step of a
// company's removal), so a table a migration adds is looked in without a
// change here, even by a server that opened the database before a newer
// binary's admin command migrated it.
const companyTables = `SELECT c.table_name FROM information_schema.columns c
	JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
	WHERE c.table_schema = current_schema() AND c.column_name = 'company_id' AND t.table_type = 'BASE TABLE'
		AND c.table_name NOT IN ('companies', 'users')
	ORDER BY c.table_name`

// PruneAbandonedSignups removes the abandoned sign-ups (store.AbandonedSignup)
// created before cutoff among at most limit companies whose ids follow
// after, in id order, each with every record of it, in one transaction.
// The owner's one-time tokens, the company's row and the owner's are
// locked (in that order, the order a verification takes the token and the
// user in) before the rule is read again and the rows deleted, so a
// verification that commits first keeps the company, and one that comes
// after finds its token gone. The owner's links are read again once the
// owner is locked: a link stored meanwhile (a password reset asked for)
// keeps the company, and none is stored after (PutOneTimeToken shares the
// user's row). now tells a live one-time token from an
// expired one. It returns how many it removed and the id of the last
// company it looked at, 0 once none is left after it. Identity columns
// never give an id twice, so the removed ids stay taken.
func (s *Store) PruneAbandonedSignups(cutoff, now time.Time, after uint64, limit int) (removed int, last uint64, err error) {
	err = s.write("prune abandoned sign-ups", func(t *txn) error {
		removed, last = 0, 0
		var ids []int64
		rows, err := t.query("SELECT id FROM companies WHERE id > $1 ORDER BY id LIMIT $2", id(after), limit)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		if len(ids) == limit && limit > 0 {
			last = uint64(ids[len(ids)-1])
		}
		// The companies whose rows read as abandoned now, unlocked.
		owners, err := abandonedOwners(t, ids, cutoff)
		if err != nil || len(owners) == 0 {
			return err
		}
		users := make([]int64, 0, len(owners))
		for _, u := range owners {
			users = append(users, id(u))
		}
		// Locked, in a verification's order, then read again.
		if _, err := liveLinks(t, users, now, true); err != nil {
			return err
		}
		companies := make([]int64, 0, len(owners))
		for c := range owners {
			companies = append(companies, id(c))
		}
		slices.Sort(companies)
		if _, err := t.exec("SELECT 1 FROM companies WHERE id = ANY ($1) ORDER BY id FOR UPDATE", companies); err != nil {
			return err
		}
		if _, err := t.exec("SELECT 1 FROM users WHERE company_id = ANY ($1) ORDER BY id FOR UPDATE", companies); err != nil {
			return err
		}
		owners, err = abandonedOwners(t, companies, cutoff)
		if err != nil || len(owners) == 0 {
			return err
		}
		// The links stored since the first read, before the owners were
		// locked: a link is stored under the user's row shared
		// (PutOneTimeToken), so none comes from here on. They are read,
		// not locked: a verification that holds one waits for its owner,
		// and the company stays.
		live, err := liveLinks(t, users, now, false)
		if err != nil {
			return err
		}
		busy, err := companiesWithRows(t, owners)
		if err != nil {
			return err
		}
		var goneCompanies, goneUsers []int64
		for c, u := range owners {
			if live[u] || busy[c] {
				continue
			}
			goneCompanies, goneUsers = append(goneCompanies, id(c)), append(goneUsers, id(u))
		}
		if len(goneCompanies) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue("DELETE FROM one_time_tokens WHERE (rec->>'user_id')::bigint = ANY ($1)", goneUsers)
		b.Queue("DELETE FROM users WHERE id = ANY ($1)", goneUsers)
		b.Queue("DELETE FROM companies WHERE id = ANY ($1)", goneCompanies)
		if err := t.sendBatch(b); err != nil {
			return err
		}
		removed = len(goneCompanies)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return removed, last, nil
}

// abandonedOwners reads, among the companies ids, those created before
// cutoff whose records read as an abandoned sign-up's (the company's API
// key never rotated, one user, the sign-up's unverified owner, with no
// refresh-token family or console session), and returns their owners by
// company id.
func abandonedOwners(t *txn, ids []int64, cutoff time.Time) (map[uint64]uint64, error) {
	rows, err := t.query(`SELECT c.rec, u.rec FROM companies c JOIN users u ON u.company_id = c.id
		WHERE c.id = ANY ($1)
			AND NOT EXISTS (SELECT 1 FROM users o WHERE o.company_id = c.id AND o.id <> u.id)
			AND NOT EXISTS (SELECT 1 FROM token_families f WHERE f.user_id = u.id)
			AND NOT EXISTS (SELECT 1 FROM console_sessions s WHERE s.user_id = u.id)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	owners := map[uint64]uint64{}
	for rows.Next() {
		var craw, uraw []byte
		if err := rows.Scan(&craw, &uraw); err != nil {
			return nil, err
		}
		var c store.Company
		var u store.User
		if err := json.Unmarshal(craw, &c); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(uraw, &u); err != nil {
			return nil, err
		}
		if c.CreatedAt.Before(cutoff) && c.APIKeyCreatedAt.Equal(c.CreatedAt) && store.SignupOwnerUnverified(u) {
			owners[c.ID] = u.ID
		}
	}
	return owners, rows.Err()
}

// companiesWithRows says which of the companies have a row in a table of
// companyTables: one statement over them all, one round trip after the
// catalogue's.
func companiesWithRows(t *txn, owners map[uint64]uint64) (map[uint64]bool, error) {
	rows, err := t.query(companyTables)
	if err != nil {
		return nil, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		return nil, err
	}
	ids := make([]int64, 0, len(owners))
	for c := range owners {
		ids = append(ids, id(c))
	}
	parts := make([]string, len(tables))
	for i, table := range tables {
		parts[i] = "SELECT company_id FROM " + pgx.Identifier{table}.Sanitize() + " WHERE company_id = ANY ($1)"
	}
	rows, err = t.query(strings.Join(parts, " UNION "), ids)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	busy := map[uint64]bool{}
	for _, c := range got {
		busy[uint64(c)] = true
	}
	return busy, nil
}

// liveLinks says which of the users hold a one-time token not used and
// not expired at now; with lock it locks their tokens, in hash order.
func liveLinks(t *txn, users []int64, now time.Time, lock bool) (map[uint64]bool, error) {
	q := `SELECT (rec->>'user_id')::bigint, rec FROM one_time_tokens WHERE (rec->>'user_id')::bigint = ANY ($1)`
	if lock {
		q += " ORDER BY hash FOR UPDATE"
	}
	rows, err := t.query(q, users)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	live := map[uint64]bool{}
	for rows.Next() {
		var uid int64
		var raw []byte
		if err := rows.Scan(&uid, &raw); err != nil {
			return nil, err
		}
		var tok store.OneTimeToken
		if err := json.Unmarshal(raw, &tok); err != nil {
			return nil, err
		}
		if tok.UsedAt.IsZero() && now.Before(tok.ExpiresAt) {
			live[uint64(uid)] = true
		}
	}
	return live, rows.Err()
}
