package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
)

// maxTries bounds how often a transaction runs when the database asks for
// a retry (a serialization failure or a deadlock): the closures are written
// to run more than once, as bbolt's group commit runs them.
const maxTries = 10

// write runs fn in a READ COMMITTED transaction and commits it, running it
// again (up to maxTries) when the database answers with a serialization
// failure or a deadlock. fn keeps every rule it checks true by locking
// the row that guards it (SELECT ... FOR UPDATE), by a unique constraint,
// or by one conditional statement: see doc.go. name says what the write
// is, for errors.
func (s *Store) write(name string, fn func(t *txn) error) error {
	return s.run(name, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

// read runs fn in a read-only REPEATABLE READ transaction: every statement
// of fn sees the same snapshot, as a bbolt read transaction does.
func (s *Store) read(name string, fn func(t *txn) error) error {
	return s.run(name, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// defaultPruneBatch is how many rows one transaction of a prune deletes
// (Store.pruneBatch): a few thousand rows are some tens of milliseconds
// of work and a few megabytes of WAL (docs/performance.md, Prunes), so
// each batch holds its row locks that long, not the whole backlog's time.
const defaultPruneBatch = 5000

// defaultDeviceBatch is how many of a device's unfinished messages one
// transaction of its deletion fails (Store.deviceBatch): a batch is a few
// round trips whatever its size (failMessages), so a thousand take some
// tens of milliseconds (docs/performance.md).
const defaultDeviceBatch = 1000

// pruneBudget bounds one prune's batches all together: a backlog larger
// than that much deleting (millions of rows) is left to the next sweep,
// so that one table's backlog does not hold up the sweeper's other work.
const pruneBudget = 10 * time.Minute

// pruneBatches is a sweeper's prune: it runs batch, each time in a
// transaction of its own (write, so within the store's deadline,
// Options.TxTimeout), with the most rows a batch may delete, until a batch
// deletes nothing, one fails (the store closed: its error) or pruneBudget
// is spent. A batch that deleted fewer than it may is not the end: a row
// a writer changed under it (deleteSome) is not deleted, and the rows
// after it are found by the next batch. A backlog after an outage is then
// many short transactions, none holding its rows' locks or its WAL for
// long, and the batches that committed stay deleted when a later one
// fails. It returns how many rows the batches said they deleted, with the
// error of the batch that failed.
func (s *Store) pruneBatches(name string, batch func(t *txn, limit int) (int, error)) (int, error) {
	total := 0
	for start := time.Now(); ; {
		var n int
		err := s.write(name, func(t *txn) error {
			var err error
			n, err = batch(t, s.pruneBatch)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 || time.Since(start) >= pruneBudget {
			return total, nil
		}
	}
}

// readUnbounded is read without the store's transaction deadline, for the
// admin commands' reads whose time grows with the whole database (the
// counts that check a copy): none of the server's requests uses it.
func (s *Store) readUnbounded(name string, fn func(t *txn) error) error {
	return s.runWithin(name, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, 0, fn)
}

// run runs fn in a transaction within the store's deadline
// (Options.TxTimeout): each try, from the wait for a connection of the
// pool to the COMMIT, gets that long, and one that runs past it fails
// with store.ErrUnavailable (unreachable), the database silent or too
// slow to serve, where it would wait for the operating system's TCP
// timeout, many minutes, on a database whose host stopped answering.
func (s *Store) run(name string, opts pgx.TxOptions, fn func(t *txn) error) error {
	return s.runWithin(name, opts, s.txTimeout, fn)
}

// runWithin is run with each try bounded by within; 0: no bound but the
// store's Close.
func (s *Store) runWithin(name string, opts pgx.TxOptions, within time.Duration, fn func(t *txn) error) error {
	var err error
	for try := 0; try < maxTries; try++ {
		if try > 0 {
			// Back off a little, more each time, so the transactions that
			// collided do not collide again in step.
			select {
			case <-time.After(time.Duration(try*try) * time.Millisecond):
			case <-s.ctx.Done():
				return fmt.Errorf("store: %s: %w", name, store.ErrClosed)
			}
		}
		var hooks []func()
		hooks, err = s.try(opts, within, fn)
		if err == nil {
			for _, h := range hooks {
				h()
			}
			return nil
		}
		if !retryable(err) {
			break
		}
	}
	if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
		err = store.ErrClosed
	}
	return failed(name, err)
}

// failed is the error a transaction named name returns when it failed
// with err: err as classified says.
func failed(name string, err error) error {
	return fmt.Errorf("store: %s: %w", name, classified(err))
}

// classified is err, an error of the database or of the way to it, with
// the store's error for it in front: a database out of reach is
// store.ErrUnavailable, one out of room or of another resource
// store.ErrDiskFull or store.ErrUnavailable (exhausted); anything else is
// err as it is. The database's own error stays in the chain. It is the one
// classifier of the store: transactions get it through failed, and the
// statements that run outside one (the rate-limit windows, the stream
// leases, the load, the reads through the pool) through closed, so that the
// API and the log tell the same state whichever path met it. An error classified
// already is returned as it is.
func classified(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if cause := exhausted(err); cause != nil {
		return fmt.Errorf("%w: %w", cause, err)
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// try runs fn once in a transaction on a connection of the pool, within
// that long (0: unbounded): the transaction's BEGIN goes out with fn's
// first statement (txn.go). The deadline ends the wait for a connection
// and any statement in flight: pgx then sets the connection's own
// deadline, so a read from a silent socket returns at once, and closes the
// connection, which never goes back to the pool.
func (s *Store) try(opts pgx.TxOptions, within time.Duration, fn func(t *txn) error) ([]func(), error) {
	ctx := s.ctx
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(s.ctx, within)
		defer cancel()
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &txn{ctx: ctx, conn: conn, opts: opts, sh: -1, pick: s.pickShard}
	defer t.end() // rolls back unless committed, also when fn panics
	if err := fn(t); err != nil {
		return nil, mapErr(t.cause(err))
	}
	if err := t.commit(); err != nil {
		return nil, mapErr(t.cause(err))
	}
	return t.onCommit, nil
}

// unreachable says whether err means the database could not be reached or
// the connection broke, rather than an answer of the database. A statement
// sent on a connection that pgx closed already (its socket broke under an
// earlier statement that read no error of it: a server stopped with
// "immediate") fails with pgconn.ErrConnClosed, a broken connection too;
// it was answered 500 'internal' where the next statement got 503. A
// deadline passed (the store's transaction deadline, a bounded statement's)
// is one too: the database did not answer in time, silent or overloaded.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P03" // admin shutdown, cannot connect now
	}
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)
}

// closed is err of a statement made outside a transaction (the rate-limit
// windows, the stream leases, the load, the reads through the pool)
// classified as a transaction's (a database out of reach is
// store.ErrUnavailable, the API's 503, not a bare error and a 500), or
// store.ErrClosed when the store was closed before or under the statement:
// its context is cancelled then, and the pool's "context canceled" or
// "closed pool" would read as a fault of the database, where the embedded
// store and the transactions (run) answer store.ErrClosed.
func (s *Store) closed(err error) error {
	if err == nil {
		return nil
	}
	if s.ctx.Err() != nil {
		return store.ErrClosed
	}
	return classified(err)
}

// exhausted is the store's error for a database that answered it ran out
// of a resource (SQLSTATE class 53), nil for any other error. Each of
// them aborted the transaction, so nothing was written, and each is a
// state of the database server, not of the request: the same call
// succeeds once the server has what it lacked (doc.go, "Resources").
//   - 53100 disk_full: a table or index could not grow its file. It is
//     store.ErrDiskFull, as the embedded store's full disk is.
//   - 53000 insufficient_resources, 53200 out_of_memory, 53300
//     too_many_connections (its server's max_connections taken, by this
//     pool and whatever else connects): store.ErrUnavailable, as a
//     database out of reach is.
//
// 53400 configuration_limit_exceeded is not among them: a statement over
// temp_file_limit is over it again when run again.
func exhausted(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil
	}
	switch pe.Code {
	case "53100":
		return store.ErrDiskFull
	case "53000", "53200", "53300":
		return store.ErrUnavailable
	}
	return nil
}

// retryable says whether a transaction that failed with err may succeed if
// run again: a serialization failure or a deadlock the database broke.
func retryable(err error) bool {
	if errors.Is(err, errAgain) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// mapErr turns the database's answers into the store's errors: a row not
// found is store.ErrNotFound, a broken unique constraint store.ErrConflict.
// Anything else is returned as it is.
func mapErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w (%s)", store.ErrConflict, pe.ConstraintName)
	}
	return err
}

// getRec reads the jsonb record the statement selects (one column, one
// row) into v; no row is store.ErrNotFound.
func getRec(t *txn, v any, sql string, args ...any) error {
	var raw []byte
	if err := t.row(sql, args...).Scan(&raw); err != nil {
		return mapErr(err)
	}
	return json.Unmarshal(raw, v)
}

// getRecs reads the jsonb records the statement selects (one column) into
// a slice, in the statement's order; none is an empty slice.
func getRecs[T any](t *txn, sql string, args ...any) ([]T, error) {
	rows, err := t.query(sql, args...)
	if err != nil {
		return nil, err
	}
	return scanRecs[T](rows)
}

// scanRecs reads the jsonb records of rows (one column) into a slice, in
// their order, and closes them; none is an empty slice.
func scanRecs[T any](rows pgx.Rows) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// rec is the jsonb value of a record.
func rec(v any) ([]byte, error) { return json.Marshal(v) }

// id is a store id (uint64) as the database's bigint. Ids come from
// identity columns, so they fit; store.StatsNoUser becomes -1.
func id(v uint64) int64 { return int64(v) }

// deleteSome deletes at most limit rows of table that match where, a
// condition on its rows whose arguments are $2 on (args), and returns how
// many it deleted. One statement: the subquery finds the rows' ctids, by
// the index on where's column or a scan of the table that stops at limit
// rows, as the planner finds cheaper, and the delete takes them by a TID
// scan. A row a writer changed since the statement's snapshot has another
// ctid by then, and is left alone (it no longer matches, or the next batch
// finds it), so the rows are neither locked twice (FOR UPDATE, which
// wrote each row once more and halved the rate) nor ever deleted when a
// writer renewed them.
func deleteSome(t *txn, table, where string, limit int, args ...any) (int, error) {
	tag, err := t.exec(deleteSomeSQL(table, where), append([]any{limit}, args...)...)
	return int(tag.RowsAffected()), err
}

// deleteSomeSQL is deleteSome's statement: $1 is the limit.
func deleteSomeSQL(table, where string) string {
	return "DELETE FROM " + table + " WHERE ctid = ANY (ARRAY (SELECT ctid FROM " + table + " WHERE " + where + " LIMIT $1))"
}
