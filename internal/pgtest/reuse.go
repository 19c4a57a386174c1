//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Copying a template costs PostgreSQL a fifth of a second of CPU (a new
// database copies its system catalogs, several megabytes, whatever the
// schema), which a package of a hundred and fifty tests on two cores feels.
// So a copy a test is done with is made new again in place and handed to the
// next test of the same template: the rows the test wrote are deleted and
// the sequences put back where the template had them, in a few milliseconds.
// A copy is reused only when nothing of the template's could differ: no
// session still open in it, its schema as the template's (a test that
// altered a table, or added one, leaves its copy to be dropped), the rows
// prepare wrote unchanged, and not so many rows written that deleting them
// would leave a bloated table to the next test. Anything else drops it, as
// before.

// maxRecycledRows bounds the rows a copy may hold for it to be reused: a
// load test's copy is dropped rather than left full of dead rows.
const maxRecycledRows = 20000

// snapshot is what a reused copy must match, taken from the template once
// prepare is done.
type snapshot struct {
	xid      int64             // the cluster's transaction counter when taken (catalogQuery)
	catalogs string            // the schema's catalogs (catalogQuery)
	filled   map[string]string // tables prepare wrote rows to -> hash of their rows
	emptied  []string          // the other tables: a reset deletes their rows
	seqs     []seqPos          // every sequence, where prepare left it
}

type seqPos struct {
	name   string // quoted, schema-qualified
	value  int64
	called bool
}

// catalogQuery says of each catalog that holds a part of the schema (its
// relations, columns, defaults, constraints, indexes, types, functions,
// triggers, rules, namespaces, and the database's own settings) how many
// rows it has and how many of them a transaction after $1 wrote. A copy of
// the template has the template's catalog rows, each written before the
// snapshot's transaction; any DDL in the copy writes rows of its own (an
// ALTER, a CREATE, a CREATE OR REPLACE: each a row version with a newer
// xmin) or removes some (a DROP: fewer rows), so the answer differs from
// the template's exactly when the schema could. A rolled-back DDL's rows are
// dead, counted nowhere. It reads the catalogs' rows as they are, where the
// text fingerprint it replaced deparsed every column, default and
// constraint (6 ms of the server's CPU a reset, a quarter of it). The xids
// compare as 32-bit numbers: a test cluster lives for one test binary, far
// from the 2^31 transactions of a wraparound.
const catalogQuery = `SELECT string_agg(rel || ' ' || n || ' ' || newer, ', ' ORDER BY rel) FROM (
	SELECT 'pg_class' AS rel, count(*) AS n, count(*) FILTER (WHERE xmin::text::bigint > $1) AS newer FROM pg_class
	UNION ALL SELECT 'pg_attribute', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_attribute
	UNION ALL SELECT 'pg_attrdef', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_attrdef
	UNION ALL SELECT 'pg_constraint', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_constraint
	UNION ALL SELECT 'pg_index', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_index
	UNION ALL SELECT 'pg_type', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_type
	UNION ALL SELECT 'pg_enum', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_enum
	UNION ALL SELECT 'pg_sequence', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_sequence
	UNION ALL SELECT 'pg_proc', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_proc
	UNION ALL SELECT 'pg_trigger', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_trigger
	UNION ALL SELECT 'pg_rewrite', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_rewrite
	UNION ALL SELECT 'pg_namespace', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_namespace
	UNION ALL SELECT 'pg_db_role_setting', count(*), count(*) FILTER (WHERE xmin::text::bigint > $1) FROM pg_db_role_setting
		WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
) s`

// tablesQuery lists the ordinary and partitioned tables outside the system
// schemas, quoted and schema-qualified.
const tablesQuery = `SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
	ORDER BY 1`

// writtenQuery answers those of the tables $1 that have a page: a table
// that never had a row has none (a row written and deleted since leaves
// its page, so such a table is emptied again, finding nothing).
const writtenQuery = `SELECT t FROM unnest($1::text[]) AS t WHERE pg_relation_size(t::regclass) > 0`

// rowsHash is the hash of a table's rows, in a stable order.
func rowsHash(table string) string {
	return "SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM " + table + " t"
}

// takeSnapshot reads the template at url, prepared and closed.
func takeSnapshot(ctx context.Context, url string) (*snapshot, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	snap := &snapshot{filled: map[string]string{}}
	// Every transaction of prepare's ended before this one (prepare closed
	// its connections), so every row it wrote is older than xid.
	if err := conn.QueryRow(ctx, "SELECT txid_current() % 4294967296").Scan(&snap.xid); err != nil {
		return nil, fmt.Errorf("read the transaction counter: %w", err)
	}
	if err := conn.QueryRow(ctx, catalogQuery, snap.xid).Scan(&snap.catalogs); err != nil {
		return nil, fmt.Errorf("read the catalogs: %w", err)
	}
	tables, err := queryStrings(ctx, conn, tablesQuery)
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	for _, table := range tables {
		var any bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+table+")").Scan(&any); err != nil {
			return nil, fmt.Errorf("look into %s: %w", table, err)
		}
		if !any {
			snap.emptied = append(snap.emptied, table)
			continue
		}
		var h string
		if err := conn.QueryRow(ctx, rowsHash(table)).Scan(&h); err != nil {
			return nil, fmt.Errorf("hash %s: %w", table, err)
		}
		snap.filled[table] = h
	}
	rows, err := conn.Query(ctx, `SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename), coalesce(last_value, start_value), last_value IS NOT NULL
		FROM pg_sequences`)
	if err != nil {
		return nil, fmt.Errorf("read the sequences: %w", err)
	}
	snap.seqs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (seqPos, error) {
		var p seqPos
		return p, r.Scan(&p.name, &p.value, &p.called)
	})
	if err != nil {
		return nil, fmt.Errorf("read the sequences: %w", err)
	}
	return snap, nil
}

func queryStrings(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// errNotReusable says why a copy is dropped instead of reused.
var errNotReusable = errors.New("not reusable")

// reset makes the copy name what the template was when snap was taken, or
// says why it cannot; on an error the copy is left for dropping.
func reset(ctx context.Context, name string, snap *snapshot) error {
	// A session its client just closed takes a moment to leave
	// pg_stat_activity; one still there after sessionGrace was left open.
	var sessions int
	for deadline := time.Now().Add(sessionGrace); ; time.Sleep(5 * time.Millisecond) {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`,
			name).Scan(&sessions); err != nil {
			return err
		}
		if sessions == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d sessions still open", errNotReusable, sessions)
		}
	}
	conn, err := pgx.Connect(ctx, shared.url(name))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// A lock a session of the test left behind fails the reset rather
		// than holding up the next test; replica mode lets the rows go in
		// any order, whatever the foreign keys between them.
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '2s'; SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		var catalogs string
		if err := tx.QueryRow(ctx, catalogQuery, snap.xid).Scan(&catalogs); err != nil {
			return err
		}
		if catalogs != snap.catalogs {
			return fmt.Errorf("%w: its schema changed (%s, the template's %s)", errNotReusable, catalogs, snap.catalogs)
		}
		for table, want := range snap.filled {
			var h string
			if err := tx.QueryRow(ctx, rowsHash(table)).Scan(&h); err != nil {
				return err
			}
			if h != want {
				return fmt.Errorf("%w: the rows of %s changed", errNotReusable, table)
			}
		}
		// A table whose file has no page holds no row: only the others
		// are emptied. A DELETE on each of the schema's tables opened it
		// and its indexes and planned the statement, 9 ms of the server's
		// CPU a reset for the few tables a test writes to.
		written, err := queryStrings(ctx, tx.Conn(), writtenQuery, snap.emptied)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, table := range written {
			b.Queue("DELETE FROM " + table)
		}
		for _, s := range snap.seqs {
			b.Queue("SELECT setval($1::regclass, $2, $3)", s.name, s.value, s.called)
		}
		res := tx.SendBatch(ctx, b)
		var deleted int64
		for range written {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return err
			}
			deleted += tag.RowsAffected()
		}
		for range snap.seqs {
			if _, err := res.Exec(); err != nil {
				res.Close()
				return err
			}
		}
		if err := res.Close(); err != nil {
			return err
		}
		if deleted > maxRecycledRows {
			return fmt.Errorf("%w: %d rows written", errNotReusable, deleted)
		}
		return nil
	})
}

// spares are a template's copies ready for the next test.
type spares struct {
	mu    sync.Mutex
	names []string
}

func (s *spares) take() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.names) == 0 {
		return "", false
	}
	name := s.names[len(s.names)-1]
	s.names = s.names[:len(s.names)-1]
	return name, true
}

func (s *spares) put(name string) {
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
}

const (
	// resetTimeout bounds a reset; one that takes longer drops the copy.
	resetTimeout = 30 * time.Second
	// sessionGrace is how long a reset waits for the sessions of a test
	// that closed them to end.
	sessionGrace = time.Second
)
