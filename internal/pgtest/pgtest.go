//go:build unix

package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The test binary's cluster, started by the first URL.
var (
	mainCalled atomic.Bool
	once       sync.Once
	shared     *cluster
	admin      *pgxpool.Pool // the superuser on database postgres, for CREATE and DROP DATABASE
	startErr   error
	dbSeq      atomic.Uint64
	// templates are the prepared databases of URLFrom, by key.
	templates sync.Map // key -> *template
)

// template is a database prepared once per test binary, which URLFrom
// copies for each test.
type template struct {
	once   sync.Once
	name   string
	err    error
	snap   *snapshot // what a copy must match to be reused (reuse.go)
	spares spares    // copies made new again, ready for the next test
}

// Main runs the tests, then stops the cluster (when a test started one) and
// removes its directory, and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to do after the tests: it
// returns the code instead of exiting.
func Run(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if shared != nil {
		admin.Close()
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL creates a fresh, empty database for t in the binary's cluster
// (starting it on first use), drops it when t ends, and answers its
// connection URL. Without PostgreSQL it fails t, saying how to install it.
func URL(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) from the package's TestMain, so the cluster is stopped when the tests end")
	}
	once.Do(func() { shared, admin, startErr = start() })
	if startErr != nil {
		t.Fatal(startErr)
	}
	return create(t, "template0", nil)
}

// URLFrom is URL for a database that starts as a copy of one prepare made:
// the first call with key creates a database, calls prepare with its URL
// (a schema's migrations, say; prepare must close every connection it
// opened), and keeps it as a template; every call copies it, which costs a
// file copy instead of running prepare again.
func URLFrom(t testing.TB, key string, prepare func(url string) error) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: call pgtest.Main(m) from the package's TestMain, so the cluster is stopped when the tests end")
	}
	once.Do(func() { shared, admin, startErr = start() })
	if startErr != nil {
		t.Fatal(startErr)
	}
	v, _ := templates.LoadOrStore(key, &template{})
	tm := v.(*template)
	tm.once.Do(func() {
		tm.name = "tmpl_" + strconv.FormatUint(dbSeq.Add(1), 10)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{tm.name}.Sanitize()+" TEMPLATE template0"); err != nil {
			tm.err = fmt.Errorf("pgtest: create template %s: %w", tm.name, err)
			return
		}
		if err := prepare(shared.url(tm.name)); err != nil {
			tm.err = fmt.Errorf("pgtest: prepare template %s: %w", key, err)
			return
		}
		snap, err := takeSnapshot(ctx, shared.url(tm.name))
		if err != nil {
			tm.err = fmt.Errorf("pgtest: read template %s: %w", key, err)
		}
		tm.snap = snap
	})
	if tm.err != nil {
		t.Fatal(tm.err)
	}
	return create(t, tm.name, tm)
}

// create makes a new database for t, a copy of tmpl, dropped when t ends.
// With tm (a prepared template) the database may be a spare copy another
// test was done with, made new again, and is given back as a spare when t
// ends if it can be made new again (reuse.go).
func create(t testing.TB, tmpl string, tm *template) string {
	t.Helper()
	if tm != nil {
		if name, ok := tm.spares.take(); ok {
			t.Cleanup(func() { recycle(t, name, tm) })
			return shared.url(name)
		}
	}
	name := "t_" + strconv.FormatUint(dbSeq.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Nothing stays connected to a template (template0 is never connected
	// to; a prepared one only while prepare runs), so concurrent creates
	// from it never find it busy.
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	if tm != nil {
		t.Cleanup(func() { recycle(t, name, tm) })
	} else {
		t.Cleanup(func() { drop(t, name) })
	}
	return shared.url(name)
}

// recycle gives a test's copy of tm back as a spare, or drops it when it
// cannot be made new again.
func recycle(t testing.TB, name string, tm *template) {
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	if err := reset(ctx, name, tm.snap); err != nil {
		drop(t, name)
		return
	}
	tm.spares.put(name)
}

// drop drops a test's database.
func drop(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// FORCE ends the sessions a test left open (a pool not closed).
	if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: drop database %s: %v", name, err)
	}
}

func start() (*cluster, *pgxpool.Pool, error) {
	c, err := startCluster(context.Background())
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(c.url("postgres"))
	if err == nil {
		cfg.MaxConns = 4
		var pool *pgxpool.Pool
		if pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err == nil {
			return c, pool, nil
		}
	}
	c.stop()
	return nil, nil, fmt.Errorf("pgtest: connect to the test cluster: %w", err)
}
