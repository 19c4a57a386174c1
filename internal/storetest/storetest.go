// Package storetest gives the tests of the packages above the store a real
// store to work on, opened for the test and closed when it ends, with a
// company when the test needs one. The backend is bbolt (a file in the
// test's temporary directory) unless SIMRELAY_TEST_STORE=postgres, which
// gives each test a fresh database of a PostgreSQL cluster the test binary
// starts (internal/pgtest): `make test` runs the server's suites both ways.
// A package whose tests open stores calls storetest.Main (or Run) from its
// TestMain, so that cluster is stopped when its tests end.
package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/waitpar"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

// EnvStore names the backend the tests run on: "postgres", or "" (bbolt).
const EnvStore = "SIMRELAY_TEST_STORE"

// Postgres says whether the tests run on PostgreSQL.
func Postgres() bool { return os.Getenv(EnvStore) == "postgres" }

// EmbeddedOnly skips t on the PostgreSQL run, saying why: for a test whose
// method belongs to the embedded store (its file, its backup stream, its
// single writer held to stand for a slow fsync), which the bbolt run of the
// same test holds.
func EmbeddedOnly(t testing.TB, why string) {
	t.Helper()
	if Postgres() {
		t.Skipf("about the embedded store only (%s); the bbolt run holds it", why)
	}
}

// PostgresEitherWay skips t on the PostgreSQL run, saying why: for a test
// that runs on PostgreSQL whatever the backend (nodes of a cluster sharing
// a database, a database cut off through a relay, a copy into one), which
// the bbolt run runs the same, and under -race in make test's first pass.
func PostgresEitherWay(t testing.TB) {
	t.Helper()
	if Postgres() {
		t.Skip("on PostgreSQL whatever the backend: make test's first pass runs it, under -race")
	}
}

// Main runs the package's tests and exits with their code; call it from
// TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with more to do after the tests.
//
// On PostgreSQL it runs at least pgParallel of the package's parallel tests
// at once (waitpar.AtLeast; a -parallel on the command line stays the
// user's choice): their time goes on round trips to the database server,
// another process, and at go test's default of one test per core the
// cores sat idle meanwhile. httpapi on PostgreSQL, 4 pairs run in turn on a
// loaded 2-core machine: 31 to 48 s at 2 at once, 18 to 38 s at 4, each 4
// the faster of its pair by 5 to 13 s, for the same CPU time. Beside web's
// tests, as make test's second pass starts them, the CPU is shared and the
// gain was within that machine's noise (54.5 and 55.5 s against 51.3 and
// 55.0 s).
func Run(m *testing.M) int {
	if Postgres() {
		waitpar.AtLeast(pgParallel)
	}
	return pgtest.Run(m)
}

// pgParallel is how many parallel tests Run runs at once on PostgreSQL at
// least: each holds a pool of connections to the test cluster (200
// connections, pgtest), a few each.
const pgParallel = 4

// Options are the settings a test's store opens with.
type Options struct {
	// CompanyDailyStorage is each company's daily storage budget in bytes; 0: none.
	CompanyDailyStorage int64
	// Durable keeps bbolt's fsync per commit, for the tests of what survives
	// a crash or of the store's pace under load; the others skip it.
	Durable bool
	// SyncDelay holds the embedded store's writer this long after each
	// commit (boltstore.Options.SyncDelay), standing in for a slow disk;
	// tests that set it are EmbeddedOnly.
	SyncDelay time.Duration
	// Statements, when set, counts the statements a PostgreSQL store sends;
	// on bbolt it stays at zero.
	Statements *Statements
	// Relayed, when set, opens the PostgreSQL store through a relay
	// (pgtest.Relay) and hands the relay to it, so a test can take the
	// database out of reach (Cut) and bring it back (Resume); the bbolt run
	// never calls it.
	Relayed func(*pgtest.Relayed)
}

// Statements counts the SQL statements a store sends to PostgreSQL, BEGIN
// and COMMIT included, each statement of a pgx.Batch too (a pgx tracer on
// every connection of its pool): a test proves with it that a request's
// cost does not grow with the rows it answers. Safe for concurrent use.
type Statements struct{ n atomic.Int64 }

// TraceQueryStart counts one statement.
func (c *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing: a statement counts when it starts.
func (c *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing: a batch's statements count one by one.
func (c *Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts one statement of a batch.
func (c *Statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }

// TraceBatchEnd does nothing.
func (c *Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Count is how many statements were sent so far.
func (c *Statements) Count() int64 { return c.n.Load() }

// Open opens a new, durable store for t.
func Open(t testing.TB) store.Backend { return OpenWith(t, Options{Durable: true}) }

// OpenWith opens a new store for t with opt; it closes when t ends.
func OpenWith(t testing.TB, opt Options) store.Backend {
	t.Helper()
	var st store.Backend
	if Postgres() {
		popt := postgres.Options{CompanyDailyStorage: opt.CompanyDailyStorage}
		if opt.Statements != nil {
			popt.Tracer = opt.Statements
		}
		url := migrated(t)
		if opt.Relayed != nil {
			relay := pgtest.Relay(t, url)
			url = relay.URL
			opt.Relayed(relay)
		}
		pg, err := postgres.Open(context.Background(), url, popt)
		if err != nil {
			t.Fatal(err)
		}
		st = pg
	} else {
		dir := t.TempDir()
		if err := newBoltFile(dir); err != nil {
			t.Fatal(err)
		}
		b, err := boltstore.Open(dir, boltstore.Options{CompanyDailyStorage: opt.CompanyDailyStorage, BulkLoad: !opt.Durable, SyncDelay: opt.SyncDelay})
		if err != nil {
			t.Fatal(err)
		}
		st = b
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("storetest: close the store: %v", err)
		}
	})
	return st
}

// newBoltFile writes into dir a copy of a new, empty store's data file
// (64 KiB), which boltstore.Open then finds at this build's schema. A new
// file's migration creates every bucket and commits them, the largest part
// of opening a store: under -race, httpapi's set-up of a server, a company
// and a phone took 36 ms of CPU with it and 33 ms with the copy. The copy
// is the file that migration wrote, made once a test binary.
func newBoltFile(dir string) error {
	b, err := emptyBoltFile()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, boltstore.FileName), b, 0o600)
}

// emptyBoltFile is the data file of a store opened new and closed.
var emptyBoltFile = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "storetest-bolt-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		return nil, fmt.Errorf("storetest: a new bbolt store: %w", err)
	}
	if err := s.Close(); err != nil {
		return nil, fmt.Errorf("storetest: close a new bbolt store: %w", err)
	}
	return os.ReadFile(filepath.Join(dir, boltstore.FileName))
})

// migrated is a new database with the store's schema: a copy of one the
// test binary migrated once.
func migrated(t testing.TB) string {
	return pgtest.URLFrom(t, "simrelay-schema", func(url string) error {
		s, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			return err
		}
		return s.Close()
	})
}

// Company stores a company named name with an admin whose address is email.
func Company(t testing.TB, st store.Backend, name, email string) store.Company {
	t.Helper()
	c := store.Company{Name: name, APIKeyHash: []byte(fmt.Sprintf("key of %s", name))}
	if err := st.CreateCompany(&c, &store.User{Email: email, PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	return c
}
