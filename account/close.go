package account

import (
	"context"
	"errors"
	"time"

	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// CloseBatch is about how many records one step of a company's removal
// takes (store.CompanyRemoval), as the operator's command takes them: some
// milliseconds of the embedded store's single writer, or of row locks on
// PostgreSQL, each.
const CloseBatch = 1000

// ErrCloseNeedsUser answers an API key that asks to close its company:
// the company's end is a signed-in admin's decision, and a key that leaked
// from an integration must not be able to erase the company.
var ErrCloseNeedsUser = problem.New(problem.UserTokenRequired, "Closing the company needs a signed-in admin's access token, not the API key.")

// Unlinker closes the link of a device's phone, on whichever node of a
// cluster it is (gateway.Hub's Disconnect).
type Unlinker interface {
	Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{}
}

// CloseCompany closes the caller's company at its admin's request: confirm
// must be the company's name exactly as stored. A company that a payment
// provider's subscription still bills, whose checkout can still be paid or
// is being opened (store.RemovalBlocked: the rules of simrelay admin
// delete-company) is refused with a conflict and nothing changes. These
// looks and the company's closing mark are one transaction
// (store.Backend.MarkCompanyClosing); then the removal's first step takes
// every credential of the company (its API key, users with their sessions,
// refresh and one-time tokens, devices with their tokens, pairing codes)
// before CloseCompany returns, the API key out of every node's cache too,
// and the phones linked to its devices (read after the mark, which no
// registration passes, and just before that step) are told through phones
// (nil: none) that their device is gone, with the close code PROTOCOL.md
// gives a deleted device (4503); nothing waits for their last seen, which
// goes with the device. No other link is left: from the mark on, the
// store refuses the company's device tokens (its API key, its users) before
// the step takes them, or when it fails, so a link whose second look at
// its token (gateway) comes after the mark is refused, and one whose look
// came before it is registered by the time its phone is told. The rest
// is for the server's background work (RunClosings), which finishes every
// company marked closing, after a restart too. A step that fails leaves
// the company closing: the background work takes it from there, and the
// error is returned.
func (s *Service) CloseCompany(ctx context.Context, p Principal, confirm string, phones Unlinker) (store.Company, error) {
	if p.ViaAPIKey {
		return store.Company{}, ErrCloseNeedsUser
	}
	if !p.IsAdmin() {
		return store.Company{}, problem.New(problem.Forbidden, "Only an admin of the company may close it.")
	}
	c, err := s.store.Company(p.CompanyID)
	if err != nil {
		return store.Company{}, mapStoreErr(err, "company")
	}
	switch {
	case confirm == "":
		return store.Company{}, problem.Invalid("confirm", "is required: the company's name, exactly as stored")
	case confirm != c.Name:
		return store.Company{}, problem.Invalid("confirm", "must be the company's name exactly as stored (its case and spaces too)")
	}
	c, err = s.store.MarkCompanyClosing(c.ID, s.now(), func(c store.Company, sub store.Subscription, found bool) error {
		switch store.RemovalBlocked(sub, found, s.now()) {
		case store.RemovalSubscription:
			return problem.New(problem.Conflict, "The company pays through a Stripe subscription that has not ended: cancel it in the billing portal (POST /billing/portal), then close the company once the cancellation shows in GET /billing/subscription.")
		case store.RemovalCheckoutPayable:
			return problem.Newf(problem.Conflict, "The company has a Stripe checkout that can be paid until %s: paid after the company is gone, it would start a subscription Stripe bills. Close the company after that time.",
				sub.Checkout.ExpiresAt.UTC().Format(time.RFC3339))
		case store.RemovalCheckoutOpening:
			return problem.New(problem.Conflict, "A Stripe checkout is being opened for the company: try again in a few minutes.")
		}
		return nil
	})
	if pe, ok := problem.As(err); ok {
		return store.Company{}, pe
	}
	if err != nil {
		return store.Company{}, mapStoreErr(err, "company")
	}
	s.log.Info("company closing at its admin's request", "company_id", c.ID, "user_id", p.UserID)
	// Read before the devices go with the company's credentials.
	devs, listErr := s.store.CompanyDevices(c.ID)
	if listErr != nil {
		s.log.Warn("list a closing company's devices: their phones keep their links until they reconnect", "company_id", c.ID, "err", listErr)
	}
	r, err := s.store.RemoveCompanyStep(c.ID, CloseBatch)
	if err == nil && r.Done {
		// A small company goes in this one step: no sweep logs it.
		s.logRemoved(c.ID, r)
		s.tellRemoved(c.ID)
	}
	// The store no longer knows the key (or, when the step failed, will
	// not once the background work runs it); neither may the caches.
	s.forgetKey(c.APIKeyHash)
	s.forgetKeyElsewhere(ctx, c.APIKeyHash)
	if phones != nil {
		for _, d := range devs {
			phones.Disconnect(d.Fingerprint, d.ID, androidproto.CloseDeviceGone, "device deleted")
		}
	}
	select {
	case s.closing <- struct{}{}:
	default: // RunClosings is woken already
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Company{}, err
	}
	return c, nil
}

// Remover runs the steps of a company's removal.
type Remover interface {
	RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error)
}

// RemoveCompany runs the removal of a company marked closing
// (store.Backend.MarkCompanyClosing) to its end, step after step of about
// CloseBatch records (store.Backend.RemoveCompanyStep), until the step
// that removes its record or ctx ends; total is what the steps removed,
// Done when one of them removed the record. A company removed by another
// run (another node, an admin command) before or between these steps is
// gone all the same: nil, with Done false, as that run ends it. The
// operator's command (simrelay admin delete-company) and the server's
// finishing of closed companies (RunClosings) both run it.
func RemoveCompany(ctx context.Context, st Remover, companyID uint64) (total store.CompanyRemoval, err error) {
	for !total.Done {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		r, err := st.RemoveCompanyStep(companyID, CloseBatch)
		if errors.Is(err, store.ErrNotFound) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		total.Add(r)
	}
	return total, nil
}

// MaxClosingBackoff is the longest a closing company whose removal step
// keeps failing waits for its next try (ClosingRetryAfter).
const MaxClosingBackoff = time.Hour

// ClosingRetryAfter is how long a closing company waits for its next try
// after its removal failed failures times in a row: the sweep's period
// after the first failure, twice as long after each one more, at most
// MaxClosingBackoff (with a minute's sweep: 1, 2, 4, 8, 16, 32 minutes,
// then every hour).
func ClosingRetryAfter(sweep time.Duration, failures int) time.Duration {
	wait := max(sweep, time.Millisecond)
	for i := 1; i < failures && wait < MaxClosingBackoff; i++ {
		wait *= 2
	}
	return min(wait, MaxClosingBackoff)
}

// closingRetry is a closing company whose last try at its removal failed:
// how many tries failed in a row, and when the next one is due.
type closingRetry struct {
	failures int
	next     time.Time
}

// RunClosings finishes the removal of every company marked closing
// (store.Backend.ClosingCompanies): at once, whenever CloseCompany closes
// one here, and every sweep otherwise, which finds the removals that a
// stopped server (kill -9, a restart), another node of a cluster or a
// stopped admin command left, until ctx ends. Every step is idempotent,
// so two nodes that finish the same company at once only share its steps.
// A company whose step fails is logged ("company removal failing", with
// its failures in a row and the wait) and tried again after a wait that
// doubles with each failure in a row, from one sweep to
// MaxClosingBackoff (ClosingRetryAfter); ClosingsFailing and
// ClosingFailures count them for the server's metrics.
func (s *Service) RunClosings(ctx context.Context, sweep time.Duration) {
	t := time.NewTicker(sweep)
	defer t.Stop()
	for {
		s.finishClosings(ctx, sweep)
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
		case <-t.C:
		}
	}
}

// ClosingsFailing is how many closing companies' last try at their
// removal failed here (each waits for its next, RunClosings).
func (s *Service) ClosingsFailing() int {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	return len(s.retries)
}

// ClosingFailures is how many tries at a closing company's removal
// failed here since the server started.
func (s *Service) ClosingFailures() int64 {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	return s.closingFailures
}

// finishClosings removes every company marked closing whose try is due,
// to its end.
func (s *Service) finishClosings(ctx context.Context, sweep time.Duration) {
	ids, err := s.store.ClosingCompanies()
	if err != nil {
		s.log.Error("list the companies closing", "err", err)
		return
	}
	s.keepRetries(ids)
	for _, id := range ids {
		if !s.removalDue(id) {
			continue
		}
		total, err := RemoveCompany(ctx, s.store, id)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r := s.removalFailed(id, sweep)
			s.log.Error("company removal failing: a step failed; tried again later", "company_id", id, "failures", r.failures,
				"retry_in", r.next.Sub(s.now()).String(), "err", err)
			continue
		}
		s.removalEnded(id)
		s.tellRemoved(id)
		if !total.Done {
			// Another run (a node, the admin command) removed the record
			// and logs it.
			s.log.Debug("company's removal finished by another run", "company_id", id)
			continue
		}
		s.logRemoved(id, total)
	}
}

// keepRetries forgets the failures of companies no longer closing (ids,
// the closing list): another run finished them.
func (s *Service) keepRetries(ids []uint64) {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if len(s.retries) == 0 {
		return
	}
	listed := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	for id := range s.retries {
		if !listed[id] {
			delete(s.retries, id)
		}
	}
}

// removalDue says whether the company's removal may be tried now: it
// never failed here, or its wait is over.
func (s *Service) removalDue(id uint64) bool {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	r, failed := s.retries[id]
	return !failed || !s.now().Before(r.next)
}

// removalFailed records one more failure of the company's removal, and
// when it is tried again.
func (s *Service) removalFailed(id uint64, sweep time.Duration) closingRetry {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if s.retries == nil {
		s.retries = make(map[uint64]closingRetry)
	}
	r := s.retries[id]
	r.failures++
	r.next = s.now().Add(ClosingRetryAfter(sweep, r.failures))
	s.retries[id] = r
	s.closingFailures++
	return r
}

// OnRemoved sets what is told of each company whose removal ended here,
// by a step of this node (CloseCompany, RunClosings) or, found ended by
// RunClosings, another run's: what the server keeps in memory per company
// goes with it (the agent channels' governor: channel Service.ForgetCompany).
// A removal another node of a cluster (or an admin command) ended before
// this one looked is not told; what is kept must go by its own rule too
// (the governor's: channel.Service asks the store once a minute). Call it
// before serving.
func (s *Service) OnRemoved(fn func(companyID uint64)) { s.removed = fn }

// tellRemoved tells OnRemoved's function, if any, that the company is gone.
func (s *Service) tellRemoved(companyID uint64) {
	if s.removed != nil {
		s.removed(companyID)
	}
}

// removalEnded forgets the company's failures: its removal ended.
func (s *Service) removalEnded(id uint64) {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	delete(s.retries, id)
}

// logRemoved logs the end of a company's removal with what it removed.
func (s *Service) logRemoved(companyID uint64, r store.CompanyRemoval) {
	s.log.Info("company removed", "company_id", companyID, "messages", r.Messages, "users", r.Users,
		"devices", r.Devices, "records", r.Records)
}
