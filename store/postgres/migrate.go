package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

//go:embed migrations/*.sql
var embedded embed.FS

// migrationLock is the advisory lock key (a database-wide 64-bit number) a
// node holds while it migrates: "simrelay" in ASCII, unlikely to be another
// application's on the same database.
const migrationLock int64 = 0x73696d72656c6179

// ErrSchemaTooNew refuses a database migrated by a newer simrelay: this
// binary would not know its tables.
var ErrSchemaTooNew = errors.New("the database's schema is newer than this simrelay")

// ErrNodesRunning refuses to migrate a schema that live nodes use: they run
// an older simrelay (a node migrates at its start, so one running on an
// older schema started with an older binary), which knows nothing of the
// new schema, and nodes of two versions sharing the work are not tested
// (docs/cluster.md, Upgrading the nodes).
var ErrNodesRunning = errors.New("nodes of an older simrelay run on this database")

// ErrNoSchema refuses, with Options.Existing, a database without the table
// schema_version: not simrelay's. It refuses too, with or without
// Options.Existing, a database whose table schema_version is another
// application's (foreignVersions): simrelay neither reads its versions nor
// migrates into that database.
var ErrNoSchema = errors.New("no simrelay schema in the database")

// empty refuses (Options.Empty, store.ErrNotEmpty) a database that holds a company of
// simrelay's schema, of any version, or tables and no simrelay schema: one
// that is new, or simrelay's without a company, passes. It only reads, so
// a database refused is left exactly as it was, its schema unmigrated.
func empty(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	current, err := schemaVersion(ctx, q)
	if err != nil {
		return err
	}
	if current == 0 {
		tables, err := tableCount(ctx, q)
		if err != nil {
			return fmt.Errorf("count its tables: %w", err)
		}
		if tables > 0 {
			return fmt.Errorf("%w (no table schema_version): it holds %s, not simrelay's", ErrNoSchema, problem.Count(tables, "table"))
		}
		return nil
	}
	var companies int
	if err := q.QueryRow(ctx, "SELECT count(*) FROM companies").Scan(&companies); err != nil {
		return fmt.Errorf("count the companies: %w", err)
	}
	if companies > 0 {
		return fmt.Errorf("%w: it holds %s", store.ErrNotEmpty, problem.Count(companies, "company"))
	}
	return nil
}

// firstMigration is the name simrelay records in schema_version for its
// migration 1 (migrations/0001_schema.sql), in the transaction that creates
// the table: a table schema_version without that row is not simrelay's.
const firstMigration = "schema"

// noSchema is the refusal (ErrNoSchema) of a database into which no
// simrelay ever migrated its schema (its schema version 0), saying whether
// it is empty or holds other tables. It only reads.
func noSchema(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	tables, err := tableCount(ctx, q)
	if err != nil {
		return fmt.Errorf("%w (no table schema_version); counting its tables: %w", ErrNoSchema, err)
	}
	if tables == 0 {
		return fmt.Errorf("%w (no table schema_version): it holds no table", ErrNoSchema)
	}
	return fmt.Errorf("%w (no table schema_version): it holds %s, not simrelay's", ErrNoSchema, problem.Count(tables, "table"))
}

// tableCount is how many tables the database holds outside PostgreSQL's
// own catalogs.
func tableCount(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var tables int
	err := q.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables)
	return tables, err
}

// migrateLiveWithin is how recent a node's beat in the registry
// (cluster_nodes) must be for a migration to take it as running: the
// registry's default live window, the longest --node-live-window takes
// (cmd/simrelay's defaultNodeLiveWithin): a node live by a shorter window
// is live by this one too.
const migrateLiveWithin = 10

// clusterSchema is the first schema version with the registry of nodes.
const clusterSchema = 11

// migration is one file of migrations/, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads the migrations of fsys (*.sql in migrations/),
// which must be numbered 1, 2, 3... without a gap.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	files, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for i, f := range files { // Glob sorts by name, so by number
		m := migrationName.FindStringSubmatch(path.Base(f))
		if m == nil {
			return nil, fmt.Errorf("migration %s: want a name such as 0002_devices.sql", f)
		}
		v, _ := strconv.Atoi(m[1])
		if v != i+1 {
			return nil, fmt.Errorf("migration %s: want number %04d next", f, i+1)
		}
		sql, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: m[2], sql: string(sql)})
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations")
	}
	return ms, nil
}

// migrate applies the migrations the database lacks, all in one
// transaction under the advisory lock: nodes starting together wait for
// the first one, then find its work done. It answers the schema version.
// existing (Options.Existing) refuses a database without simrelay's
// schema (noSchema) instead, having created nothing.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, ms []migration, existing bool) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return 0, fmt.Errorf("take the migration lock: %w", err)
	}
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return 0, err
	}
	if existing && current == 0 {
		return 0, noSchema(ctx, tx)
	}
	latest := ms[len(ms)-1].version
	if current > latest {
		return current, fmt.Errorf("%w: it is at version %d, this simrelay knows up to %d: run the newer simrelay that migrated it (there is no going back)", ErrSchemaTooNew, current, latest)
	}
	if current < latest && current >= clusterSchema {
		if err := noLiveNodes(ctx, tx, current, latest); err != nil {
			return current, err
		}
	}
	for _, m := range ms[current:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return current, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return current, fmt.Errorf("migration %04d_%s: record it: %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return current, err
	}
	return latest, nil
}

// liveNodes names, in order, the nodes whose beat in the registry is
// within migrateLiveWithin seconds, by the database server's clock.
func liveNodes(query func(string, ...any) (pgx.Rows, error)) ([]string, error) {
	rows, err := query("SELECT name FROM cluster_nodes WHERE seen_at > now() - make_interval(secs => $1) ORDER BY name", migrateLiveWithin)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// noLiveNodes refuses the migration from current to latest while nodes beat
// in the registry: stop them all first. A node stopped cleanly has left it;
// one killed a moment ago counts until its last beat is migrateLiveWithin
// seconds old.
func noLiveNodes(ctx context.Context, tx pgx.Tx, current, latest int) error {
	names, err := liveNodes(func(sql string, args ...any) (pgx.Rows, error) { return tx.Query(ctx, sql, args...) })
	if err != nil {
		return fmt.Errorf("read the nodes before migrating: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: this simrelay migrates the schema from version %d to %d, which the running nodes (%s) do not know: stop every node, then start the new version (a node killed a moment ago counts for %d s after its last beat)",
		ErrNodesRunning, current, latest, strings.Join(names, ", "), migrateLiveWithin)
}

// schemaVersion is the highest migration applied, 0 for a database without
// the schema_version table (a new one). A table schema_version that is not
// simrelay's (another application's in the same database, or found first
// on the search_path) is refused with ErrNoSchema.
func schemaVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	// The columns simrelay's table has (migrations/0001_schema.sql), with
	// their types; a later migration may add columns, never change these.
	// Read from the catalog, so that a table without them is not queried
	// for them (an error would abort the migration's transaction).
	var exists bool
	var columns int
	if err := q.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL,
		(SELECT count(*) FROM pg_catalog.pg_attribute
			WHERE attrelid = to_regclass('schema_version') AND attnum > 0 AND NOT attisdropped
			AND (attname, atttypid) IN (('version', 'integer'::regtype), ('name', 'text'::regtype), ('applied_at', 'timestamptz'::regtype)))`).Scan(&exists, &columns); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	if columns != 3 {
		return 0, foreignVersions()
	}
	var v int
	var first *string
	if err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0), (SELECT name FROM schema_version WHERE version = 1 LIMIT 1) FROM schema_version").Scan(&v, &first); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if first == nil || *first != firstMigration {
		return 0, foreignVersions()
	}
	return v, nil
}

// foreignVersions refuses a database whose table schema_version is not
// simrelay's.
func foreignVersions() error {
	return fmt.Errorf("%w: it holds a schema_version table that is not simrelay's", ErrNoSchema)
}
