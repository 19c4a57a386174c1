package webhook

import (
	"context"
	"time"

	"github.com/simrelay/simrelay/store"
)

// dispatch claims due deliveries and hands them to the workers, each at
// most once at a time, and between due times sleeps until the next one, a
// Kick or (on a cluster) the end of cfg.Poll.
func (s *Service) dispatch(ctx context.Context, jobs chan<- store.WebhookDue) {
	for ctx.Err() == nil {
		limit := s.claimLimit()
		if limit == 0 {
			s.wake.Wait(ctx, s.now().Add(s.cfg.Poll), s.now) // a worker's end kicks
			continue
		}
		ready, next, err := s.store.ClaimWebhookDeliveries(s.now(), limit, s.skipper())
		if err != nil {
			s.log.Error("webhook outbox", "err", err)
			next = s.now().Add(storeRetryDelay)
		}
		for _, d := range ready {
			s.take(d)
			select {
			case jobs <- d:
			case <-ctx.Done():
				s.done(d)
				s.release(d)
				return
			}
		}
		if len(ready) > 0 {
			continue // handing out took time: more may be due now
		}
		if s.cfg.Poll > 0 {
			if poll := s.now().Add(s.cfg.Poll); next.IsZero() || poll.Before(next) {
				next = poll
			}
		}
		s.wake.Wait(ctx, next, s.now)
	}
}

// claimLimit is how many deliveries the dispatcher claims at once:
// dispatchBatch on one node; on a cluster (cfg.Poll set) only as many as
// it has idle workers, since a claimed delivery's lease runs while it
// waits for a worker, and one that waited out its lease behind slow
// receivers could be claimed and attempted by a second node.
func (s *Service) claimLimit() int {
	if s.cfg.Poll == 0 {
		return dispatchBatch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := 0
	for _, n := range s.perCompany {
		busy += n
	}
	return min(max(s.cfg.Workers-busy, 0), dispatchBatch)
}

// skipper passes over deliveries already handed out (until their attempt
// is recorded), over those of an entry that already has cfg.entryBound()
// attempts under way, and over those of a company that already has
// cfg.PerCompany under way (counting the ones this read lets through, and
// on a cluster the entry's and the company's deliveries other nodes hold
// leased): a
// slow or unreachable receiver holds at most that many workers, one
// company's receivers never hold them all, and the others' deliveries go
// on. An attempt is under way from its hand-out until its answer (or
// timeout), not while its line waits for the commit. A full company or
// entry it names as such (store.DuePassCompany, store.DuePassEntry), so
// the store passes over the rest of its due deliveries without reading
// them: a company whose receivers hang with thousands due costs a pass
// little more than one whose receivers answer.
func (s *Service) skipper() store.DueSkip {
	batch := map[uint64]int{}
	companyBatch := map[uint64]int{}
	return func(d store.WebhookDue) store.DueVerdict {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case d.CompanyLeased+s.perCompany[d.CompanyID]+companyBatch[d.CompanyID] >= s.cfg.PerCompany:
			return store.DuePassCompany
		case d.EntryLeased+s.perEntry[d.WebhookID]+batch[d.WebhookID] >= s.cfg.entryBound():
			return store.DuePassEntry
		case s.busy[d.ID]:
			return store.DuePass
		}
		batch[d.WebhookID]++
		companyBatch[d.CompanyID]++
		return store.DueTake
	}
}

// take marks a delivery handed out and its attempt under way.
func (s *Service) take(d store.WebhookDue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy[d.ID] = true
	s.perEntry[d.WebhookID]++
	s.perCompany[d.CompanyID]++
}

// done ends the attempt's time under way: its entry and company may start
// another. The delivery stays handed out until release.
func (s *Service) done(d store.WebhookDue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perEntry[d.WebhookID]--; s.perEntry[d.WebhookID] <= 0 {
		delete(s.perEntry, d.WebhookID)
	}
	if s.perCompany[d.CompanyID]--; s.perCompany[d.CompanyID] <= 0 {
		delete(s.perCompany, d.CompanyID)
	}
}

// release lets the dispatcher hand the delivery out again (its next attempt,
// once due): its last attempt is recorded, or could not be.
func (s *Service) release(d store.WebhookDue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, d.ID)
}

// later releases a delivery whose attempt the store failed to read or
// record after storeRetryDelay, rather than retrying it in a hot loop.
func (s *Service) later(d store.WebhookDue) {
	time.AfterFunc(storeRetryDelay, func() { s.release(d); s.Kick() })
}
