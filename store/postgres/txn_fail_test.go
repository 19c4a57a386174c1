package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// insertFirsts insert one row into tx_probe as a transaction's first
// statement, by each way one goes out; some leave their answer unread.
var insertFirsts = map[string]func(t *txn, k string) error{
	"exec": func(t *txn, k string) error {
		_, err := t.exec("INSERT INTO tx_probe (k) VALUES ($1)", k)
		return err
	},
	"row": func(t *txn, k string) error {
		return t.row("INSERT INTO tx_probe (k) VALUES ($1) RETURNING k", k).Scan(&k)
	},
	"row not scanned": func(t *txn, k string) error {
		t.row("INSERT INTO tx_probe (k) VALUES ($1) RETURNING k", k)
		return nil
	},
	"rows not read": func(t *txn, k string) error {
		_, err := t.query("INSERT INTO tx_probe (k) VALUES ($1) RETURNING k", k)
		return err
	},
	"rows closed": func(t *txn, k string) error {
		rows, err := t.query("INSERT INTO tx_probe (k) VALUES ($1) RETURNING k", k)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	},
	"sendBatch": func(t *txn, k string) error {
		b := &pgx.Batch{}
		b.Queue("INSERT INTO tx_probe (k) VALUES ($1)", k)
		return t.sendBatch(b)
	},
}

// A closure that fails after its first statement leaves no row and its
// connection idle, back in the pool, whether or not it read that
// statement's answer; one that succeeds commits its row.
func TestTxFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	s := probeStore(t)
	boom := errors.New("boom")
	for name, insert := range insertFirsts {
		err := s.write(name, func(t *txn) error {
			if err := insert(t, name); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("%s, then an error: %v, want it", name, err)
		}
		if n := probes(t, s); n != 0 {
			t.Fatalf("%s, then an error: %d rows, want 0", name, n)
		}
		allIdle(t, s)
	}
	for name, insert := range insertFirsts {
		if err := s.write(name, func(t *txn) error { return insert(t, name) }); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		allIdle(t, s)
	}
	if n := probes(t, s); n != len(insertFirsts) {
		t.Errorf("%d rows committed, want %d", n, len(insertFirsts))
	}
}

// A panic in a transaction rolls it back and gives its connection back
// before it goes on up; the store works after it.
func TestTxPanic(t *testing.T) {
	t.Parallel()
	s := probeStore(t)
	for name, insert := range insertFirsts {
		got := func() (v any) {
			defer func() { v = recover() }()
			_ = s.write(name, func(t *txn) error {
				if err := insert(t, name); err != nil {
					return err
				}
				panic("in " + name)
			})
			return nil
		}()
		if got != "in "+name {
			t.Fatalf("%s, then a panic: recovered %v, want the panic", name, got)
		}
		if n := probes(t, s); n != 0 {
			t.Fatalf("%s, then a panic: %d rows, want 0", name, n)
		}
		allIdle(t, s)
	}
	if err := s.write("after", func(t *txn) error { return insertFirsts["exec"](t, "after") }); err != nil || probes(t, s) != 1 {
		t.Fatalf("a write after the panics: %v, %d rows, want 1", err, probes(t, s))
	}
}

// A serialization failure or a deadlock, in the first statement or a
// later one, runs the transaction again: the failed try's row is rolled
// back (else the second would break the key) and its hooks dropped.
func TestTxRetried(t *testing.T) {
	t.Parallel()
	s := probeStore(t)
	for i, code := range []string{"40001", "40P01", "40001", "40P01"} {
		raise := fmt.Sprintf("DO $$ BEGIN RAISE EXCEPTION 'try again' USING ERRCODE = '%s'; END $$", code)
		first := i < 2 // the failure in the batch that begins the transaction
		var tries, hooks int
		err := s.write("retried", func(t *txn) error {
			tries++
			t.OnCommit(func() { hooks++ })
			if first && tries == 1 {
				_, err := t.exec(raise)
				return err
			}
			if err := insertFirsts["exec"](t, fmt.Sprint("retried-", i)); err != nil {
				return err
			}
			if tries == 1 {
				_, err := t.exec(raise)
				return err
			}
			return nil
		})
		if err != nil || tries != 2 || hooks != 1 {
			t.Fatalf("%s (first statement %v): %v after %d tries, %d hooks run, want success on the second, one hook", code, first, err, tries, hooks)
		}
	}
	if n := probes(t, s); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
	allIdle(t, s)
}

// A transaction that runs no statement sends none, BEGIN and COMMIT
// included, and still commits: its hooks run. One of one statement sends
// three in two round trips.
func TestTxEmptySendsNothing(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	for _, run := range []func(string, func(*txn) error) error{s.write, s.read} {
		n0, t0 := counted.n.Load(), counted.trips.Load()
		ran := false
		if err := run("empty", func(t *txn) error {
			t.OnCommit(func() { ran = true })
			return nil
		}); err != nil || !ran {
			t.Fatalf("an empty transaction: %v, hook run %v", err, ran)
		}
		if n, trips := counted.n.Load()-n0, counted.trips.Load()-t0; n != 0 || trips != 0 {
			t.Errorf("an empty transaction sent %d statements in %d round trips, want none", n, trips)
		}
	}
	// One statement: BEGIN goes with it, then COMMIT.
	for _, run := range []func(string, func(*txn) error) error{s.write, s.read} {
		n0, t0 := counted.n.Load(), counted.trips.Load()
		var one int
		if err := run("one", func(t *txn) error { return t.row("SELECT 1").Scan(&one) }); err != nil || one != 1 {
			t.Fatalf("one statement: %d (%v)", one, err)
		}
		if n, trips := counted.n.Load()-n0, counted.trips.Load()-t0; n != 3 || trips != 2 {
			t.Errorf("a transaction of one statement sent %d statements in %d round trips, want 3 in 2", n, trips)
		}
	}
}

// A statement that fails aborts the transaction even where the closure
// ignored its error: PostgreSQL answers the COMMIT with ROLLBACK and no
// error, and the store fails the transaction (pgx.ErrTxCommitRollback):
// nothing it wrote is kept, its hooks do not run, nothing is retried.
func TestTxCommitAnsweredRollback(t *testing.T) {
	t.Parallel()
	s := probeStore(t)
	fails := map[string]func(t *txn){
		"exec": func(t *txn) { _, _ = t.exec("SELECT 1 / 0") },
		"row":  func(t *txn) { var n int; _ = t.row("SELECT 1 / 0").Scan(&n) },
		"query": func(t *txn) {
			if rows, err := t.query("SELECT 1 / 0"); err == nil {
				rows.Close()
			}
		},
		"sendBatch": func(t *txn) {
			b := &pgx.Batch{}
			b.Queue("SELECT 1 / 0")
			_ = t.sendBatch(b)
		},
		"duplicate key": func(t *txn) { _ = insertFirsts["exec"](t, "dup") },
	}
	if err := s.write("dup", func(t *txn) error { return insertFirsts["exec"](t, "dup") }); err != nil {
		t.Fatal(err)
	}
	for name, fail := range fails {
		for _, first := range []bool{true, false} {
			tries, ran := 0, false
			err := s.write(name, func(t *txn) error {
				tries++
				t.OnCommit(func() { ran = true })
				if first {
					fail(t)
				}
				if err := insertFirsts["exec"](t, "kept?"); err != nil && first {
					return nil // aborted by the failure: ignored as well
				} else if err != nil {
					return err
				}
				if !first {
					fail(t)
				}
				return nil
			})
			if !errors.Is(err, pgx.ErrTxCommitRollback) || ran || tries != 1 {
				t.Errorf("%s (first %v), error ignored: %v, hook run %v, %d tries, want pgx.ErrTxCommitRollback, no hook, one try", name, first, err, ran, tries)
			}
			if n := probes(t, s); n != 1 {
				t.Fatalf("%s (first %v): %d rows, want only the first write's", name, first, n)
			}
			allIdle(t, s)
		}
	}
}

// A transaction whose store is closed before it commits ends with
// store.ErrClosed, keeps nothing, and its connection does not go back to
// the pool inside the transaction.
func TestTxStoreClosedBeforeCommit(t *testing.T) {
	t.Parallel()
	s := probeStore(t)
	err := s.write("closed", func(t *txn) error {
		if err := insertFirsts["row"](t, "closed"); err != nil {
			return err
		}
		s.cancel()
		return nil
	})
	if !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a write whose store closed before COMMIT: %v, want store.ErrClosed", err)
	}
	if n := probes(t, s); n != 0 {
		t.Fatalf("%d rows, want 0", n)
	}
	allIdle(t, s)
}
