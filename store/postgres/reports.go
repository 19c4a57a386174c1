package postgres

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Reports (a phone's acks and status reports) share transactions, as the
// embedded store's group commit has them share fsyncs: TransitionLater
// queues a change and returns at once, so a phone's link reads its next
// frame while earlier reports wait, and a worker applies what queued
// meanwhile in one transaction, one commit for all of them. A phone back
// from an outage reports three changes a job, one after another; made one
// transaction each, its drain was bound by the commits' round trips and
// fsyncs.
//
// Each device's reports go to one worker (by device id), in the order they
// were queued, so a job's ack, sent and delivered apply in that order. A
// batch also shares its statements: it reads and locks all its messages at
// once, works the changes out in Go, one after another on the state the
// ones before left, and writes each table once (reports_plan.go,
// reports_write.go), so a batch of 60 changes costs the statements of one
// (TestReportBatchCost). TransitionDetail is a batch of one, so a change
// made alone and one made in a batch are worked out by the same code
// (TestReportBatchAsAlone holds them to the same result). A change that
// fails writes nothing and answers the error it would alone; the others
// commit. Wait returns once the change's transaction has committed, never
// before, so the link's status_ack still follows a durable write.

// reportWorkers is how many transactions of reports may be open at once.
const reportWorkers = 4

// maxReportBatch bounds the changes one transaction makes: enough to share
// a commit among a burst, few enough that its row locks are held briefly.
const maxReportBatch = 64

// reportQueue is the room for changes waiting for a worker; a link that
// finds its worker's queue full waits (its answers are bounded anyway).
const reportQueue = 1024

type report struct {
	companyID, deviceID                     uint64
	uuid, status, errText, statusAt, detail string
	now                                     time.Time
	m                                       store.Message
	moved                                   bool
	err                                     error
	done                                    chan struct{}
}

func newReport(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) *report {
	return &report{companyID: companyID, deviceID: deviceID, uuid: uuid, status: status, errText: errText, statusAt: statusAt,
		detail: detail, now: now, done: make(chan struct{})}
}

func (r *report) Wait() (store.Message, bool, error) {
	<-r.done
	return r.m, r.moved, r.err
}

// name is what a lone change's transaction is called, for its errors.
func (r *report) name() string { return "message " + r.uuid + " to " + r.status }

func (r *report) finish(m store.Message, moved bool, err error) {
	r.m, r.moved, r.err = m, moved, err
	close(r.done)
}

// reporters are the store's report workers and their queues.
type reporters struct {
	mu     sync.RWMutex // guards closed against sends on queues
	closed bool
	queues [reportWorkers]chan *report
	wg     sync.WaitGroup
}

func (s *Store) startReporters() {
	for i := range s.reports.queues {
		q := make(chan *report, reportQueue)
		s.reports.queues[i] = q
		s.reports.wg.Add(1)
		go func() {
			defer s.reports.wg.Done()
			s.reportWorker(q)
		}()
	}
}

// stopReporters ends the workers once the queued changes are done (made,
// or failed with ErrClosed once the store's context is cancelled).
func (s *Store) stopReporters() {
	s.reports.mu.Lock()
	if !s.reports.closed && s.reports.queues[0] != nil {
		s.reports.closed = true
		for _, q := range s.reports.queues {
			close(q)
		}
	}
	s.reports.mu.Unlock()
	s.reports.wg.Wait()
}

// TransitionLater queues the change TransitionDetail makes for a shared
// transaction and returns at once; Wait gives its outcome once it has
// committed. Changes queued one after another for one device apply in
// that order.
func (s *Store) TransitionLater(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) store.Transit {
	r := newReport(companyID, deviceID, uuid, status, errText, statusAt, detail, now)
	s.reports.mu.RLock()
	defer s.reports.mu.RUnlock()
	if s.reports.closed || s.reports.queues[0] == nil {
		r.finish(store.Message{}, false, store.ErrClosed)
		return r
	}
	s.reports.queues[deviceID%reportWorkers] <- r
	return r
}

func (s *Store) reportWorker(q chan *report) {
	batch := make([]*report, 0, maxReportBatch)
	for r := range q {
		batch = append(batch[:0], r)
	more:
		for len(batch) < maxReportBatch {
			select {
			case r, ok := <-q:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.applyReports(batch)
	}
}

// applyReports makes the batch's changes in one transaction, in order,
// each on the state the ones before it left (reports_plan.go). A change
// that fails writes nothing and answers its error as it would alone; the
// others commit. When a write of the batch fails (an event id taken), the
// batch is made again in two halves, so that the change at fault is
// finally made alone and fails alone, and the rest commit. A batch that
// cannot commit at all (the database unreachable or out of room or another
// resource, the store closed, retries spent) fails together: halves would
// fail as the whole did, a full disk's once a change.
func (s *Store) applyReports(batch []*report) {
	if len(batch) == 0 {
		return
	}
	type outcome struct {
		m     store.Message
		moved bool
		err   error
	}
	outs := make([]outcome, len(batch))
	name := "reports"
	if len(batch) == 1 {
		name = batch[0].name()
	}
	err := s.write(name, func(t *txn) error {
		f, err := s.readReports(t, batch)
		if err != nil {
			return err
		}
		p := newReportPlan(s.statusEvents)
		for i, r := range batch {
			m, moved, err := p.apply(f, r)
			outs[i] = outcome{m, moved, err}
		}
		return p.write(t, true)
	})
	// write classified err (tx.go): a database out of reach or out of a
	// resource is store.ErrUnavailable by then.
	if err != nil && len(batch) > 1 && !retryable(err) && !errors.Is(err, store.ErrUnavailable) && s.ctx.Err() == nil {
		half := len(batch) / 2
		s.applyReports(batch[:half])
		s.applyReports(batch[half:])
		return
	}
	for i, r := range batch {
		switch o := outs[i]; {
		case err != nil:
			r.finish(store.Message{}, false, err)
		case o.err != nil:
			// As a lone change's transaction would name it (run).
			r.finish(o.m, false, fmt.Errorf("store: %s: %w", r.name(), o.err))
		default:
			r.finish(o.m, o.moved, nil)
		}
	}
}
