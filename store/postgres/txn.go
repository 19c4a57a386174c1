package postgres

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txn is one transaction of the store on a connection of the pool. It
// sends nothing until its first statement, and that statement carries the
// transaction's BEGIN with it: one pgx.Batch, BEGIN first (pgx's
// Batch.BeginTx), sent in one round trip. PostgreSQL runs a batch's
// statements in one implicit transaction that ends at its Sync; the BEGIN
// turns it into an ordinary one that outlives the Sync, so the statement
// runs inside the transaction as if BEGIN had been sent alone before it
// (TestBeginInBatchOutlivesSync). What cannot be batched (COPY) sends the
// BEGIN alone first, as pgx.Conn.BeginTx does. A transaction that sent
// nothing commits by sending nothing.
type txn struct {
	ctx  context.Context
	conn *pgxpool.Conn
	opts pgx.TxOptions
	// tx is the transaction once its BEGIN has gone out; nil before.
	tx pgx.Tx
	// first is the batch that carried the BEGIN while its statement's
	// answer is still being read (a Row not scanned, Rows not closed);
	// nil once it is read to its end. The connection serves nothing else
	// until then: finish reads it to its end.
	first pgx.BatchResults
	// broken is the first batch's error when the connection broke under
	// it (unreachable): the error BeginTx used to return by itself, kept
	// so that the transaction fails as store.ErrUnavailable even where fn
	// reports the statement's failure as something else.
	broken   error
	onCommit []func()
	// sh is the shard of the counters this transaction adds to, chosen at
	// its first (shard); -1 before.
	sh int16
	// pick chooses sh (the store's pickShard); nil: at random.
	pick func() int16
	// charges are the bytes the transaction adds to its companies' daily
	// storage use (chargeStorage), written as its last statement.
	charges map[chargeKey]int64
}

// chargeKey is a company's day of storage use.
type chargeKey struct {
	companyID uint64
	day       int32
}

// shard is the one shard of every sharded counter row (storage use, daily
// counts, a plan's usage, the webhook outbox) this transaction adds to,
// chosen at random once. Two rows of one counter in one transaction, in
// shards chosen apart, were locked in either order by two transactions, a
// deadlock the database broke after its deadlock_timeout (a received
// message charges its storage, then its webhook event's).
func (t *txn) shard() int16 {
	if t.sh < 0 {
		if t.sh = shard(); t.pick != nil {
			t.sh = t.pick()
		}
	}
	return t.sh
}

// chargeStorage adds cost bytes to the company's storage use of the day,
// written when the transaction commits (or, by queueCharges, in its last
// batch): the day's storage_usage row is the last row every write
// transaction locks. A charge is made by writes of every kind (a received
// message, a status event, a send, an opt-out, an upload) at whatever
// point each reaches it; taken there, it was locked before the rows some
// took after it (the activity feed's oldest lines, the daily counts, the
// opt-out list, a device's row) and after them by others, and two such
// transactions of one company, in one shard, waited on each other until
// the database broke the deadlock (TestChargesLockLast). The budget's
// check reads the day's use where the charge is made, unlocked, as it
// always did.
func (t *txn) chargeStorage(companyID uint64, day int32, cost int64) {
	if t.charges == nil {
		t.charges = map[chargeKey]int64{}
	}
	t.charges[chargeKey{companyID, day}] += cost
}

// queueCharges queues the write of the transaction's charges, one
// statement, its rows in one order (by company and day), and forgets them:
// the caller sends b as the transaction's last batch.
func (t *txn) queueCharges(b *pgx.Batch) {
	if len(t.charges) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(t.charges), func(a, b chargeKey) int {
		return cmp.Or(cmp.Compare(a.companyID, b.companyID), cmp.Compare(a.day, b.day))
	})
	companies, days, shards, used := make([]int64, len(keys)), make([]int32, len(keys)), make([]int16, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		companies[i], days[i], shards[i], used[i] = id(k.companyID), k.day, t.shard(), t.charges[k]
	}
	b.Queue(`INSERT INTO storage_usage (company_id, day, shard, used) SELECT * FROM unnest($1::bigint[], $2::int[], $3::smallint[], $4::bigint[])
		ON CONFLICT (company_id, day, shard) DO UPDATE SET used = storage_usage.used + EXCLUDED.used`, companies, days, shards, used)
	t.charges = nil
}

// OnCommit runs fn after the transaction commits; never if it does not (a
// try that is run again drops the hooks of the failed try).
func (t *txn) OnCommit(fn func()) { t.onCommit = append(t.onCommit, fn) }

// exec runs a statement that returns no rows.
func (t *txn) exec(sql string, args ...any) (pgconn.CommandTag, error) {
	if t.tx != nil {
		return t.tx.Exec(t.ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	b := &pgx.Batch{}
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	err := t.sendBatch(b)
	return tag, err
}

// query runs a statement that returns rows. The first statement's Rows
// read the rest of the batch that began the transaction when they end or
// are closed.
func (t *txn) query(sql string, args ...any) (pgx.Rows, error) {
	if t.tx != nil {
		return t.tx.Query(t.ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.begin(b)
	// A failed BEGIN fails the statement after it with the same error:
	// Query answers it.
	_, _ = br.Exec()
	rows, err := br.Query()
	if err != nil {
		t.note(err)
		_ = t.finish() // err says it already
		return rows, err
	}
	return &firstRows{Rows: rows, t: t}, nil
}

// row runs a statement that returns at most one row. The first
// statement's Row reads the rest of the batch that began the transaction
// when it is scanned.
func (t *txn) row(sql string, args ...any) pgx.Row {
	if t.tx != nil {
		return t.tx.QueryRow(t.ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.begin(b)
	_, _ = br.Exec() // as in query: the row answers a failed BEGIN
	return &firstRow{row: br.QueryRow(), t: t}
}

// sendBatch sends the batch's statements in one round trip (none: no
// trip) and runs their callbacks in order; the first error is its error,
// and the transaction is then rolled back, what the batch wrote with it.
// The first statements of the transaction go with its BEGIN.
func (t *txn) sendBatch(b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	if t.tx != nil {
		return t.tx.SendBatch(t.ctx, b).Close()
	}
	t.begin(b)
	return t.finish()
}

// copyFrom copies rows into a table (COPY FROM STDIN). COPY cannot go in
// a batch: a transaction that begins with it sends its BEGIN alone first.
func (t *txn) copyFrom(table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if t.tx == nil {
		tx, err := t.conn.BeginTx(t.ctx, t.opts)
		if err != nil {
			return 0, t.note(err)
		}
		t.tx = tx
	}
	return t.tx.CopyFrom(t.ctx, table, columns, src)
}

// begin sends b's statements after the transaction's BEGIN, in one batch
// and one round trip. The batch is t.first until finish has read it to
// its end; its first result is the BEGIN's.
func (t *txn) begin(b *pgx.Batch) pgx.BatchResults {
	withBegin := &pgx.Batch{}
	withBegin.BeginTx(t.opts)
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(t.ctx, withBegin)
	// pgx's transaction on the batch: usable once the batch is closed, and
	// closed by then if the BEGIN failed (nothing to commit or roll back).
	t.tx, t.first = br.Tx(), br
	return br
}

// finish reads the batch that began the transaction to its end, running
// what callbacks its statements have; its error is the first one of the
// batch. Once read, the connection is free for the next statement.
func (t *txn) finish() error {
	if t.first == nil {
		return nil
	}
	err := t.note(t.first.Close())
	t.first = nil
	return err
}

// note keeps err, an error of the statements that began the transaction,
// as t.broken when it says the connection broke; it returns err.
func (t *txn) note(err error) error {
	if err != nil && t.broken == nil && unreachable(err) {
		t.broken = err
	}
	return err
}

// cause is err, the transaction's error, with the broken connection
// under it where err does not say so already.
func (t *txn) cause(err error) error {
	if t.broken != nil && !unreachable(err) {
		return fmt.Errorf("%w: %w", err, t.broken)
	}
	return err
}

// commit commits what the transaction sent, its charges not written yet
// first (chargeStorage); one that sent nothing has nothing to commit and
// sends nothing. A failed statement aborts the
// transaction even where fn did not look at its error: PostgreSQL then
// answers the COMMIT with ROLLBACK and no error, which pgx's Commit turns
// into pgx.ErrTxCommitRollback.
func (t *txn) commit() error {
	if err := t.finish(); err != nil {
		return err
	}
	if len(t.charges) > 0 {
		b := &pgx.Batch{}
		t.queueCharges(b)
		if err := t.sendBatch(b); err != nil {
			return err
		}
	}
	if t.tx == nil {
		return nil
	}
	return t.tx.Commit(t.ctx)
}

// end closes the transaction and gives its connection back: it reads
// what is left of the first batch, rolls back what was not committed
// (after a commit pgx sends nothing), and releases the connection. A
// ROLLBACK that cannot be sent (the store's context cancelled, the
// connection broken) makes pgx close the connection, so it never goes back
// to the pool inside a transaction. pgxpool's Release also destroys a
// connection that is busy or not idle (TxStatus other than 'I') rather
// than pool it: the last guard, not the one relied on.
func (t *txn) end() {
	_ = t.finish() // its error is fn's or commit's already
	if t.tx != nil {
		_ = t.tx.Rollback(t.ctx) // pgx.ErrTxClosed after a commit
	}
	t.conn.Release()
}

// firstRow is the Row of a transaction's first statement: scanning it
// reads the rest of the batch.
type firstRow struct {
	row pgx.Row
	t   *txn
}

func (r *firstRow) Scan(dest ...any) error {
	err := r.t.note(r.row.Scan(dest...))
	if ferr := r.t.finish(); err == nil {
		err = ferr
	}
	return err
}

// firstRows are the Rows of a transaction's first statement: their end or
// Close reads the rest of the batch.
type firstRows struct {
	pgx.Rows
	t   *txn // nil once the batch is read
	err error
}

func (r *firstRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.done()
	return false
}

func (r *firstRows) Close() {
	r.Rows.Close()
	r.done()
}

func (r *firstRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *firstRows) done() {
	if r.t == nil {
		return
	}
	r.t.note(r.Rows.Err())
	r.err = r.t.finish()
	r.t = nil
}
