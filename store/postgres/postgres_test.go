package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/waitpar"
)

func TestMain(m *testing.M) {
	// Its tests wait on the PostgreSQL server far more than they compute.
	waitpar.AtLeast(6)
	pgtest.Main(m)
}

func open(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func latest(t *testing.T) int {
	t.Helper()
	ms, err := loadMigrations(embedded)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].version
}

// rows counts the rows of schema_version.
func rows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM schema_version").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A new database gets the whole schema; opening it again changes nothing.
func TestOpenMigrates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != latest(t) {
		t.Fatalf("schema version: got %d, %v; want %d", v, err, latest(t))
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO meta (key, value) VALUES ('k', 'v')"); err != nil {
		t.Fatalf("the meta table: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	again := open(t, url)
	if v, err := again.SchemaVersion(ctx); err != nil || v != latest(t) || rows(t, again) != latest(t) {
		t.Errorf("after a second Open: version %d (%v), %d rows in schema_version; want %d and %d", v, err, rows(t, again), latest(t), latest(t))
	}
}

// sqlTracer is a store's tracer (Options.Tracer) that hears of every
// statement before it is sent, alone or in a batch.
type sqlTracer func(sql string)

func (f sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	f(d.SQL)
	return ctx
}
func (sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (f sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		f(q.SQL)
	}
	return ctx
}
func (sqlTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (sqlTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// Open with Options.Existing reads the schema version once, as any Open
// does, under the migration lock, and opens a migrated database.
func TestOpenExistingReadsTheVersionOnce(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	for _, existing := range []bool{false, true} {
		var reads atomic.Int64
		tracer := sqlTracer(func(sql string) {
			if strings.Contains(sql, "to_regclass('schema_version')") {
				reads.Add(1)
			}
		})
		s, err := Open(context.Background(), url, Options{Existing: existing, Tracer: tracer})
		if err != nil {
			t.Fatalf("Open (Existing %v): %v", existing, err)
		}
		s.Close()
		if n := reads.Load(); n != 1 {
			t.Errorf("Open (Existing %v) read the schema version %d times, want once", existing, n)
		}
	}
}

// Open with Options.Existing refuses a database without simrelay's schema,
// saying how many tables it holds, and creates nothing in it.
func TestOpenExistingRefusesWithoutTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for tables, want := range []string{
		"it holds no table",
		"it holds 1 table, not simrelay's",
		"it holds 2 tables, not simrelay's",
	} {
		url := pgtest.URL(t)
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tables {
			if _, err := pool.Exec(ctx, fmt.Sprintf("CREATE TABLE other_%d (id int)", i)); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(ctx, url, Options{Existing: true})
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, ErrNoSchema) || !strings.HasSuffix(err.Error(), "(no table schema_version): "+want) {
			t.Errorf("%d tables: got %v, want ErrNoSchema saying %q", tables, err, want)
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&n); err != nil || n != tables {
			t.Errorf("%d tables: %d after the refusal (%v)", tables, n, err)
		}
		pool.Close()
	}
}

// Nodes starting together on a new database all start, and the schema is
// migrated once.
func TestConcurrentOpens(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const nodes = 8
	var wg sync.WaitGroup
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), url, Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	if n := rows(t, stores[0]); n != latest(t) {
		t.Errorf("schema_version has %d rows, want %d (one per migration)", n, latest(t))
	}
	for i, s := range stores {
		if v, err := s.SchemaVersion(context.Background()); err != nil || v != latest(t) {
			t.Errorf("node %d: schema version %d, %v; want %d", i, v, err, latest(t))
		}
	}
}

// Each migration runs once however many nodes migrate at once, the later
// ones included: a migration that counts its runs finds one.
func TestConcurrentMigrationsRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, err := embedded.ReadFile("migrations/0001_schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(fstest.MapFS{
		"migrations/0001_schema.sql": {Data: first},
		"migrations/0002_count.sql": {Data: []byte(`INSERT INTO meta (key, value) VALUES ('runs', '1')
			ON CONFLICT (key) DO UPDATE SET value = (meta.value::int + 1)::text`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const nodes = 8
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for range nodes {
		wg.Go(func() {
			if v, err := migrate(ctx, pool, ms, false); err != nil || v != 2 {
				errs <- fmt.Errorf("migrate: version %d, %v; want 2", v, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var runs string
	if err := pool.QueryRow(ctx, "SELECT value FROM meta WHERE key = 'runs'").Scan(&runs); err != nil || runs != "1" {
		t.Errorf("the second migration ran %q times (%v), want 1", runs, err)
	}
}

// A database migrated by a newer simrelay is refused, saying so.
func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	if _, err := s.pool.Exec(ctx, "INSERT INTO schema_version (version, name) VALUES (99, 'from_the_future')"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, url, Options{})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("got %v, want ErrSchemaTooNew", err)
	}
	want := fmt.Sprintf("version 99, this simrelay knows up to %d", latest(t))
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%q does not say %q", err, want)
	}
	if n := rows(t, s); n != latest(t)+1 {
		t.Errorf("the refused Open changed schema_version: %d rows, want %d", n, latest(t)+1)
	}
}

// A database whose table schema_version is another application's (other
// columns; simrelay's columns with rows simrelay did not write; simrelay's
// columns and no row) is refused with ErrNoSchema, by a server's Open and
// an admin command's alike, and left as it was: simrelay neither takes
// its versions for a schema nor migrates into it.
func TestRefusesAnotherApplicationsSchemaVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if ms, err := loadMigrations(embedded); err != nil || ms[0].name != firstMigration {
		t.Fatalf("migration 1 is named %q (%v), firstMigration %q", ms[0].name, err, firstMigration)
	}
	simrelayColumns := "CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
	for _, tc := range []struct{ name, sql string }{
		{"other columns", "CREATE TABLE schema_version (version bigint PRIMARY KEY, description text, installed_on timestamp DEFAULT now()); INSERT INTO schema_version (version, description) VALUES (1, 'init'), (2, 'users')"},
		{"other names", simrelayColumns + fmt.Sprintf("INSERT INTO schema_version (version, name) SELECT n, 'step_' || n FROM generate_series(1, %d) n", latest(t))},
		{"no row", simrelayColumns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.URL(t)
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if _, err := pool.Exec(ctx, tc.sql); err != nil {
				t.Fatal(err)
			}
			state := func() string {
				var tables, versions string
				if err := pool.QueryRow(ctx, `SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`).Scan(&tables); err != nil {
					t.Fatal(err)
				}
				if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(row_to_json(v)::text, ',' ORDER BY v.version), '') FROM schema_version v`).Scan(&versions); err != nil {
					t.Fatal(err)
				}
				return tables + " " + versions
			}
			before := state()
			for _, existing := range []bool{false, true} {
				s, err := Open(ctx, url, Options{Existing: existing})
				if err == nil {
					s.Close()
				}
				if !errors.Is(err, ErrNoSchema) || !strings.Contains(err.Error(), "it holds a schema_version table that is not simrelay's") {
					t.Errorf("Open (Existing %v): got %v, want ErrNoSchema saying the table is not simrelay's", existing, err)
				}
			}
			if after := state(); after != before {
				t.Errorf("the refused Opens changed the database:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// A URL that is not PostgreSQL's, or a server that does not answer, fails
// Open with the reason and never the password.
func TestOpenRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ url, want string }{
		{"mysql://u:s3cret@db/simrelay", "store/postgres:"},
		{"postgres://u:s3cret@/simrelay?host=" + t.TempDir(), "store/postgres:"},
	} {
		s, err := Open(ctx, tc.url, Options{})
		if err == nil {
			s.Close()
			t.Errorf("%s: opened, want an error", tc.url)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: got %q, want an error starting %q without the password", tc.url, err, tc.want)
		}
	}
}

// The embedded migrations are numbered 1, 2, 3... and a gap or a bad name
// is refused.
func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	if _, err := loadMigrations(embedded); err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
	sql := &fstest.MapFile{Data: []byte("SELECT 1")}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"migrations/0001_a.sql": sql, "migrations/0003_c.sql": sql},
		"bad name": {"migrations/0001_a.sql": sql, "migrations/2_b.sql": sql},
		"none":     {},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loaded, want an error", name)
		}
	}
}
