package boltstore

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds the writes that share one transaction: enough to amortise
// one fsync over a burst, small enough that a commit stays short.
const maxGroup = 512

// group commit: one goroutine takes the waiting write functions, runs them
// all in one bbolt transaction and pays one fsync for all of them. Nothing
// waits on purpose: a batch is whatever queued while the last commit synced,
// so a lone write commits at once and a burst shares its fsyncs. bbolt's own
// DB.Batch waits up to 10 ms to fill a batch, which here is far slower.
type committer struct {
	db   *bolt.DB
	reqs chan *commitReq
	// delay holds the writer after each commit (Options.SyncDelay).
	delay time.Duration
	// fileThere is checked before each batch: a write to a data file no
	// path names any more is refused (fileguard.go).
	fileThere func() error
	// space sees each commit's outcome: one that found no room is
	// store.ErrDiskFull for every writer of the batch (diskfull.go).
	space *space

	// folded counts the record writes that folding saved (fold.go).
	folded atomic.Uint64
	// devices is the sends' device cache (sendcheck.go), the writer's own.
	devices deviceCache

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	done   chan struct{}
}

type commitReq struct {
	fn writer
	// folds, set instead of fn, is a message's status change: the changes
	// of a batch that follow one another share a fold (fold.go), so a job's
	// ack and the reports after it write its record once.
	folds folder
	// done carries the outcome's arrival, res the outcome: a channel of
	// empty values is one allocation, a channel of errors two (its buffer
	// holds pointers), and there is one for every write.
	done chan struct{}
	res  error
}

// newCommitReq is a request for fn or folds, not yet answered.
func newCommitReq(fn writer, folds folder) *commitReq {
	r := new(commitReq)
	r.init(fn, folds)
	return r
}

// init makes r a request for fn or folds, not yet answered: newCommitReq
// for a request that is a field of its write's own value.
func (r *commitReq) init(fn writer, folds folder) {
	r.fn, r.folds, r.done = fn, folds, make(chan struct{}, 1)
}

// answer gives the request its outcome; call it once.
func (r *commitReq) answer(err error) {
	r.res = err
	r.done <- struct{}{}
}

// writer is a write that shares its batch's transaction.
type writer interface {
	write(tx *bolt.Tx) error
}

// writeFunc is a function as a writer.
type writeFunc func(*bolt.Tx) error

func (fn writeFunc) write(tx *bolt.Tx) error { return fn(tx) }

// folder is a status change that shares its batch's fold.
type folder interface {
	change(tx *bolt.Tx, f *fold) error
}

// foldFunc is a function as a folder.
type foldFunc func(*bolt.Tx, *fold) error

func (fn foldFunc) change(tx *bolt.Tx, f *fold) error { return fn(tx, f) }

func newCommitter(db *bolt.DB, delay time.Duration, fileThere func() error, sp *space) *committer {
	c := &committer{db: db, reqs: make(chan *commitReq, maxGroup), delay: delay, fileThere: fileThere, space: sp, done: make(chan struct{})}
	go c.loop()
	return c
}

// do runs fn in a write transaction shared with other waiting writes and
// returns once that transaction is durable. fn may run more than once (a
// batch is retried without a failing member), so it must set its results
// only from inside the transaction.
func (c *committer) do(fn func(*bolt.Tx) error) error { return c.submit(fn).wait() }

// submit queues fn for the next transaction and returns without waiting
// for it (it blocks only while the queue is full); wait gives the outcome.
// Writes submitted one after another by one goroutine run in that order,
// in one transaction or in consecutive ones, so a caller may queue several
// writes and wait for them later.
func (c *committer) submit(fn func(*bolt.Tx) error) *commitReq {
	return c.queue(newCommitReq(writeFunc(fn), nil))
}

// submitFold is submit for a status change that shares the batch's fold.
func (c *committer) submitFold(fn func(*bolt.Tx, *fold) error) *commitReq {
	return c.queue(newCommitReq(nil, foldFunc(fn)))
}

func (c *committer) queue(req *commitReq) *commitReq {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		req.answer(ErrClosed)
		return req
	}
	c.reqs <- req
	c.mu.RUnlock()
	return req
}

// wait returns once the request's transaction is durable, or failed; call
// it once.
func (r *commitReq) wait() error {
	<-r.done
	return r.res
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]*commitReq, 0, maxGroup)
	for req := range c.reqs {
		batch = append(batch[:0], req)
	drain:
		for len(batch) < maxGroup {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		c.run(batch)
	}
}

func (c *committer) run(batch []*commitReq) {
	if err := c.fileThere(); err != nil {
		for _, r := range batch {
			r.answer(err)
		}
		return
	}
	for len(batch) > 0 {
		answers := make([]error, len(batch)) // the members' refusals
		err := c.db.Update(func(tx *bolt.Tx) error {
			clear(answers)
			var f fold // afresh for each try: a failed one rolled back
			for _, name := range appendBuckets {
				tx.Bucket(name).FillPercent = appendFill
			}
			for i, r := range batch {
				if r.folds != nil {
					if err := r.folds.change(tx, &f); err != nil {
						if answers[i] = refusedBy(err); answers[i] == nil {
							return &memberErr{index: i, err: err}
						}
					}
					continue
				}
				// Any other write sees the changes before it as written.
				if err := f.flush(tx); err != nil {
					return err
				}
				if err := r.fn.write(tx); err != nil {
					if answers[i] = refusedBy(err); answers[i] == nil {
						return &memberErr{index: i, err: err}
					}
				}
			}
			if err := f.flush(tx); err != nil {
				return err
			}
			if n := f.folded; n > 0 {
				tx.OnCommit(func() { c.folded.Add(n) })
			}
			return nil
		})
		if c.delay > 0 {
			time.Sleep(c.delay) // a slower disk's fsync, for measurement (Options.SyncDelay)
		}
		var me *memberErr
		if !errors.As(err, &me) {
			// The commit's outcome, success or a rollback, is every
			// writer's: none of them is answered before it is known.
			err, full := c.space.committed(err)
			for i, r := range batch {
				if err == nil && answers[i] != nil {
					r.answer(answers[i])
					continue
				}
				r.answer(err)
			}
			if full && err == nil {
				c.space.probe() // this commit fit: see whether writes fit again
			}
			return
		}
		// One function failed and took the others' work down with it: it
		// gets its own error, the rest run again without it.
		batch[me.index].answer(me.err)
		batch = append(batch[:me.index:me.index], batch[me.index+1:]...)
	}
}

// appendBuckets are keyed so that new records come last: by message id,
// by UUIDv7 (time first) and by expiry time. bbolt splits a full page at
// its FillPercent, half by default, and a page that only ever receives
// records at its end stays as full as the split left it; at 90% such
// buckets take about half the pages they would, and a commit rewrites
// fewer of them. The 10% left room lets a rewritten record grow (a status
// change, an error) without splitting its page.
var appendBuckets = [][]byte{bucketMessages, bucketMessageUUIDs, bucketQueueExpiry}

const appendFill = 0.9

// refuse is a write function's answer when it refuses and has written
// nothing: the batch it shares commits without it (a failure would roll
// back every member's work and run the rest again), and the caller gets
// err once that commit is durable, or the commit's own error. Return it
// as it is, unwrapped. A function that wrote something must fail instead.
func refuse(err error) error {
	if err == nil {
		return nil
	}
	return &refusal{err: err}
}

type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }

// Unwrap is the refused error, so that errors.Is and errors.As see through
// a refusal as through any other wrapping: a helper of a write function
// may test the error it got back (errors.Is(err, ErrNotFound)) before
// returning it to the committer.
func (r *refusal) Unwrap() error { return r.err }

// refusedBy is the refusal err carries, nil when err is a failure.
func refusedBy(err error) error {
	if r, ok := err.(*refusal); ok {
		return r.err
	}
	return nil
}

type memberErr struct {
	index int
	err   error
}

func (m *memberErr) Error() string { return m.err.Error() }
func (m *memberErr) Unwrap() error { return m.err }

// close lets queued writes finish, then stops the writer.
func (c *committer) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	<-c.done
}
