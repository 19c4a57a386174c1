package postgres

import (
	"errors"
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
// change that fails takes the transaction down with it: the changes before
// it commit without it, it is made alone (so its error is the one
// TransitionDetail gives), and the rest follow. Wait returns once the
// change's transaction has committed, never before, so the link's
// status_ack still follows a durable write.

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

func (r *report) Wait() (store.Message, bool, error) {
	<-r.done
	return r.m, r.moved, r.err
}

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
	r := &report{companyID: companyID, deviceID: deviceID, uuid: uuid, status: status, errText: errText, statusAt: statusAt, detail: detail, now: now, done: make(chan struct{})}
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

// errReportFailed aborts a shared transaction when one of its changes
// fails (applyReports' failedAt says which).
var errReportFailed = errors.New("a report of the batch failed")

// applyReports makes the batch's changes in one transaction, in order.
func (s *Store) applyReports(batch []*report) {
	for len(batch) > 0 {
		if len(batch) == 1 {
			r := batch[0]
			r.finish(s.TransitionDetail(r.companyID, r.deviceID, r.uuid, r.status, r.errText, r.statusAt, r.detail, r.now))
			return
		}
		type outcome struct {
			m     store.Message
			moved bool
		}
		outs := make([]outcome, len(batch))
		failedAt := -1
		err := s.write("reports", func(t *txn) error {
			failedAt = -1
			for i, r := range batch {
				m, moved, err := s.transition(t, r.companyID, r.deviceID, r.uuid, r.status, r.errText, r.statusAt, r.detail, r.now)
				if err != nil {
					if retryable(err) || unreachable(err) || s.ctx.Err() != nil {
						return err // the whole batch: tried again, or failed, together
					}
					failedAt = i
					return errReportFailed
				}
				outs[i] = outcome{m, moved}
			}
			return nil
		})
		if errors.Is(err, errReportFailed) && failedAt >= 0 {
			// The changes before the failed one commit without it, it is
			// made alone, and the rest go on in order.
			s.applyReports(batch[:failedAt])
			s.applyReports(batch[failedAt : failedAt+1])
			batch = batch[failedAt+1:]
			continue
		}
		for i, r := range batch {
			if err != nil {
				r.finish(store.Message{}, false, err)
				continue
			}
			r.finish(outs[i].m, outs[i].moved, nil)
		}
		return
	}
}
