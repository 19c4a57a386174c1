package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The transaction code (txn.go) rests on this: a BEGIN inside a batch (an
// extended-protocol pipeline ended by one Sync) turns the batch's implicit
// transaction into an ordinary one that is still open after the Sync;
// without it the Sync commits; and a statement that fails in it leaves an
// aborted transaction whose COMMIT PostgreSQL answers with the tag
// ROLLBACK and no error.
func TestBeginInBatchOutlivesSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := migrated(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE tx_probe (k text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	seen := func(k string) bool {
		t.Helper()
		var n int
		if err := other.QueryRow(ctx, "SELECT count(*) FROM tx_probe WHERE k = $1", k).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ")
	b.Queue("INSERT INTO tx_probe (k) VALUES ($1)", "begun")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if st := conn.PgConn().TxStatus(); st != 'T' {
		t.Fatalf("after a batch that began with BEGIN: transaction status %q, want 'T' (in a transaction)", st)
	}
	var iso string
	if err := conn.QueryRow(ctx, "SHOW transaction_isolation").Scan(&iso); err != nil || iso != "repeatable read" {
		t.Fatalf("isolation after the batch: %q (%v), want repeatable read", iso, err)
	}
	if seen("begun") {
		t.Fatal("the batch's row is visible before COMMIT: the Sync committed it")
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if seen("begun") {
		t.Fatal("the batch's row outlived its ROLLBACK")
	}

	b = &pgx.Batch{}
	b.Queue("INSERT INTO tx_probe (k) VALUES ($1)", "implicit")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' || !seen("implicit") {
		t.Fatalf("a batch without BEGIN: status %q, row seen %v, want 'I' (idle) and committed at its Sync", st, seen("implicit"))
	}

	b = &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("INSERT INTO tx_probe (k) VALUES ($1)", "aborted")
	b.Queue("SELECT 1 / 0")
	if err := conn.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("a batch dividing by zero: no error")
	}
	if st := conn.PgConn().TxStatus(); st != 'E' {
		t.Fatalf("after a failed statement: status %q, want 'E' (failed transaction)", st)
	}
	tag, err := conn.Exec(ctx, "COMMIT")
	if err != nil || tag.String() != "ROLLBACK" {
		t.Fatalf("COMMIT of the failed transaction: tag %q (%v), want ROLLBACK and no error", tag, err)
	}
	if seen("aborted") {
		t.Fatal("the failed transaction's row was committed")
	}
}

// txFirsts are the ways a transaction's first statement goes out, each
// reading the transaction's isolation level and access mode.
var txFirsts = map[string]func(t *txn) (iso, ro string, err error){
	"row": func(t *txn) (iso, ro string, err error) {
		err = t.row(showTx).Scan(&iso, &ro)
		return iso, ro, err
	},
	"query": func(t *txn) (iso, ro string, err error) {
		rows, err := t.query(showTx)
		if err != nil {
			return "", "", err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&iso, &ro); err != nil {
				return "", "", err
			}
		}
		return iso, ro, rows.Err()
	},
	"sendBatch": func(t *txn) (iso, ro string, err error) {
		b := &pgx.Batch{}
		b.Queue(showTx).QueryRow(func(r pgx.Row) error { return r.Scan(&iso, &ro) })
		return iso, ro, t.sendBatch(b)
	},
	"exec": func(t *txn) (iso, ro string, err error) {
		if _, err := t.exec("SELECT 1"); err != nil {
			return "", "", err
		}
		err = t.row(showTx).Scan(&iso, &ro)
		return iso, ro, err
	},
	"copyFrom": func(t *txn) (iso, ro string, err error) {
		// No rows: COPY still needs a table it may write.
		if _, err := t.copyFrom(pgx.Identifier{"tx_probe"}, []string{"k"}, pgx.CopyFromRows(nil)); err != nil {
			return "", "", err
		}
		err = t.row(showTx).Scan(&iso, &ro)
		return iso, ro, err
	},
}

const showTx = "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')"

// probeStore opens a store on a new database with a table of its own,
// tx_probe, for the transaction tests to write.
func probeStore(t *testing.T) *Store {
	t.Helper()
	s := openStore(t, Options{})
	if _, err := s.pool.Exec(context.Background(), "CREATE TABLE tx_probe (k text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return s
}

// probes counts tx_probe's rows.
func probes(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM tx_probe").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// allIdle waits until no connection of s's pool is held and no session of
// its database is inside a transaction.
func allIdle(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var inTx int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`).Scan(&inTx); err != nil {
			t.Fatal(err)
		}
		held := s.pool.Stat().AcquiredConns()
		if inTx == 0 && held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions idle in a transaction, %d connections held, want none", inTx, held)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Whichever statement goes first, the transaction has the isolation level
// and access mode it asked for: read committed and writable for write,
// repeatable read and read-only for read, whose writes are refused.
func TestTxOptionsApplied(t *testing.T) {
	t.Parallel()
	s := probeStore(t)
	for name, first := range txFirsts {
		var iso, ro string
		if err := s.write(name, func(t *txn) (err error) {
			iso, ro, err = first(t)
			return err
		}); err != nil || iso != "read committed" || ro != "off" {
			t.Errorf("write, %s first: isolation %q, read only %q (%v), want read committed, off", name, iso, ro, err)
		}
		if name == "copyFrom" {
			continue // a read-only transaction refuses the COPY: below
		}
		if err := s.read(name, func(t *txn) (err error) {
			iso, ro, err = first(t)
			return err
		}); err != nil || iso != "repeatable read" || ro != "on" {
			t.Errorf("read, %s first: isolation %q, read only %q (%v), want repeatable read, on", name, iso, ro, err)
		}
	}
	refused := map[string]func(t *txn) error{
		"exec": func(t *txn) error {
			_, err := t.exec("INSERT INTO tx_probe (k) VALUES ('read')")
			return err
		},
		"row": func(t *txn) error {
			var k string
			return t.row("INSERT INTO tx_probe (k) VALUES ('read') RETURNING k").Scan(&k)
		},
		"copyFrom": func(t *txn) error {
			_, err := t.copyFrom(pgx.Identifier{"tx_probe"}, []string{"k"}, pgx.CopyFromRows([][]any{{"read"}}))
			return err
		},
	}
	for name, write := range refused {
		err := s.read(name, write)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "25006" {
			t.Errorf("a write (%s) in a read: %v, want read_only_sql_transaction (25006)", name, err)
		}
	}
	if n := probes(t, s); n != 0 {
		t.Errorf("%d rows after the refused writes, want 0", n)
	}
	allIdle(t, s)
}
