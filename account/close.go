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
// goes with the device. The rest is for the server's background work
// (RunClosings), which finishes every company marked closing, after a
// restart too. A step that fails leaves the company closing: the
// background work takes it from there, and the error is returned.
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

// RunClosings finishes the removal of every company marked closing
// (store.Backend.ClosingCompanies): at once, whenever CloseCompany closes
// one here, and every sweep otherwise, which finds the removals that a
// stopped server (kill -9, a restart), another node of a cluster or a
// stopped admin command left, until ctx ends. Every step is idempotent,
// so two nodes that finish the same company at once only share its steps.
// A step that fails is logged and tried again at the next sweep.
func (s *Service) RunClosings(ctx context.Context, sweep time.Duration) {
	t := time.NewTicker(sweep)
	defer t.Stop()
	for {
		s.finishClosings(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
		case <-t.C:
		}
	}
}

// finishClosings removes every company marked closing, to its end.
func (s *Service) finishClosings(ctx context.Context) {
	ids, err := s.store.ClosingCompanies()
	if err != nil {
		s.log.Error("list the companies closing", "err", err)
		return
	}
	for _, id := range ids {
		total, err := RemoveCompany(ctx, s.store, id)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Error("finish a company's removal; tried again at the next sweep", "company_id", id, "err", err)
			continue
		}
		if !total.Done {
			// Another run (a node, the admin command) removed the record
			// and logs it.
			s.log.Debug("company's removal finished by another run", "company_id", id)
			continue
		}
		s.logRemoved(id, total)
	}
}

// logRemoved logs the end of a company's removal with what it removed.
func (s *Service) logRemoved(companyID uint64, r store.CompanyRemoval) {
	s.log.Info("company removed", "company_id", companyID, "messages", r.Messages, "users", r.Users,
		"devices", r.Devices, "records", r.Records)
}
