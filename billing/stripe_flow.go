package billing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A company has at most one checkout that can be paid: a second one, paid
// too, would bill a second subscription. The request opening one claims
// the company's subscription record first (in the store's transaction, so
// on any node of a cluster on one database); its calls to the provider are
// cut at checkoutHold. A claim older than checkoutClaimTTL is of a node
// that stopped mid-way, or of a request the store held up, and is taken
// over. Another request for the company meanwhile waits for the claim to
// end (reading the record every checkoutPoll, and trying to take the claim
// only once it looks ended or lapsed), at most checkoutWait, then answers
// 409.
const (
	checkoutHold     = time.Minute
	checkoutClaimTTL = store.CheckoutClaimTTL
	checkoutWait     = 30 * time.Second
	checkoutPoll     = 50 * time.Millisecond
	// checkoutReuseLeft is how long an open checkout must still have to
	// live to be handed out again: time to pay it.
	checkoutReuseLeft = 30 * time.Minute
)

// consoleBilling is the page Stripe's Checkout sends the payer back to,
// paid or not: the console's billing page, which shows the subscription
// once Stripe's events arrive.
const consoleBilling = "/console/billing"

// errNoWrite leaves the subscription record as it is: fn read what it needed.
var errNoWrite = errors.New("billing: nothing to write")

var errCheckoutBusy = problem.New(problem.Conflict, "A checkout for the company is being opened by another request: try again in a moment.")

var errAlreadyPays = problem.New(problem.Conflict, "The company already has a subscription (or its first payment is on its way): change its plan in the billing portal (POST /billing/portal).")

// checkout answers the company's open checkout of the same plan when it has
// one, else expires the open one (of another plan, or about to expire) at
// the provider and opens a new one, reusing the company's provider customer
// when it has one.
func (s *Service) checkout(ctx context.Context, in SubscribeInput, plan Plan) (SubscribeResult, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return SubscribeResult{}, err
	}
	token := hex.EncodeToString(b[:])
	wait, stop := context.WithTimeout(ctx, checkoutWait)
	defer stop()
	for {
		now := s.now().UTC()
		var reuse, previous string
		var read store.Subscription
		busy := false
		sub, err := s.store.UpdateSubscription(in.CompanyID, func(sub *store.Subscription) error {
			reuse, previous, busy, read = "", "", false, *sub
			// One live subscription per company: a second checkout would
			// open a second subscription, billed alongside the first.
			if paying(*sub) {
				return errAlreadyPays
			}
			var co store.Checkout
			if sub.Checkout != nil {
				co = *sub.Checkout
			}
			if claimHeld(sub.Checkout, now) {
				busy = true
				return errNoWrite
			}
			if co.SessionID != "" {
				if co.PlanID == plan.ID && co.SkipTrial == (in.SkipTrial || sub.TrialUsed) && store.CheckoutPayable(&co, now.Add(checkoutReuseLeft)) {
					reuse = co.URL
					return errNoWrite
				}
				previous = co.SessionID
			}
			co.Claim, co.ClaimedAt = token, now
			sub.Checkout = &co
			return nil
		})
		switch {
		case errors.Is(err, errNoWrite) && busy:
			if err := s.awaitClaim(wait, in.CompanyID); err != nil {
				return SubscribeResult{}, err
			}
			continue
		case errors.Is(err, errNoWrite):
			// The same checkout again (a double click, a retry, another
			// admin): the page already open, not a second one.
			_, status := s.effective(read, true, now)
			return SubscribeResult{Status: status, CheckoutURL: reuse}, nil
		case err != nil:
			return SubscribeResult{}, err
		}
		// A company is given a plan's trial once: one that has had a
		// trial (and canceled, or took the free plan) checks out without.
		in.SkipTrial = in.SkipTrial || sub.TrialUsed
		return s.openCheckout(ctx, in, plan, sub, token, previous, now)
	}
}

// claimHeld says whether co holds a live claim: one not older than
// checkoutClaimTTL, which no other request may take over.
func claimHeld(co *store.Checkout, now time.Time) bool {
	return store.CheckoutClaimHeld(co, now)
}

// awaitClaim waits until the company's checkout claim looks ended or
// lapsed, or the company pays, reading the subscription record every
// checkoutPoll; errCheckoutBusy once wait ends. It reads: a wait that tried
// to take the claim each time would take a write transaction each time,
// and queue on bbolt's single writer (and a PostgreSQL row lock) beside the
// sends for as long as the claim is held. The write transaction that
// follows decides again from what it reads.
func (s *Service) awaitClaim(wait context.Context, companyID uint64) error {
	for {
		select {
		case <-wait.Done():
			return errCheckoutBusy
		case <-time.After(checkoutPoll):
		}
		sub, _, err := s.store.Subscription(companyID)
		if err != nil {
			return err
		}
		if paying(sub) || !claimHeld(sub.Checkout, s.now().UTC()) {
			return nil
		}
	}
}

// openCheckout holds the company's checkout claim (token): it expires the
// previous session, if any, then opens one and records it, and ends the
// claim whatever happens.
func (s *Service) openCheckout(ctx context.Context, in SubscribeInput, plan Plan, sub store.Subscription, token, previous string, now time.Time) (SubscribeResult, error) {
	// A client that goes away does not cut the calls short: a session
	// opened at the provider but not recorded could still be paid.
	hold, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.hold)
	defer cancel()
	if previous != "" {
		completed, subID, err := s.cfg.Provider.ExpireCheckout(hold, previous)
		if err != nil {
			s.endCheckout(in.CompanyID, token, "")
			return SubscribeResult{}, s.providerFailed("expire checkout", in.CompanyID, err)
		}
		// Expired now, or before, or paid: it can no longer be paid again.
		// Paid, it made a subscription: the company pays, unless that is
		// the one it held, which has ended since (its completion was not
		// applied, so the checkout stayed recorded).
		if completed && (subID == "" || subID != sub.ProviderSubID) {
			s.log.Info("checkout already completed; its subscription's events are on the way", "company", in.CompanyID, "session", previous)
			s.endCheckout(in.CompanyID, token, previous)
			return SubscribeResult{}, errAlreadyPays
		}
	}
	sess, err := s.cfg.Provider.Checkout(hold, CheckoutInput{
		CompanyID: in.CompanyID, CustomerID: sub.CustomerID, Email: in.Email, Plan: plan, SkipTrial: in.SkipTrial,
		SuccessURL: s.cfg.PublicURL + consoleBilling, CancelURL: s.cfg.PublicURL + consoleBilling,
		Instance: s.instance, Now: now,
	})
	var opened *store.Checkout
	if err == nil {
		opened = &store.Checkout{SessionID: sess.ID, URL: sess.URL, PlanID: plan.ID, SkipTrial: in.SkipTrial, ExpiresAt: sess.ExpiresAt.UTC()}
	}
	// A customer made before a failed session is kept too, so that the
	// next try reuses it instead of making another.
	lost, serr := s.finishCheckout(in.CompanyID, token, previous, opened, sess.CustomerID)
	if err != nil {
		if serr != nil {
			s.log.Error("end a checkout claim", "company", in.CompanyID, "err", serr)
		}
		return SubscribeResult{}, s.providerFailed("checkout", in.CompanyID, err)
	}
	if serr != nil || lost {
		// Not recorded: the store failed, or another request took the
		// claim over (this one outlived it) and its checkout is the
		// company's. A session nobody knows of must not be paid.
		// With time of its own: the hold is spent when the store was slow
		// enough for the claim to lapse.
		s.log.Warn("checkout session opened but not recorded; expiring it", "company", in.CompanyID, "session", sess.ID, "err", serr)
		expire, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.hold)
		defer cancel()
		if _, _, xerr := s.cfg.Provider.ExpireCheckout(expire, sess.ID); xerr != nil {
			s.log.Error("expire a checkout session not recorded", "company", in.CompanyID, "session", sess.ID, "err", xerr)
		}
		if serr != nil {
			return SubscribeResult{}, serr
		}
		return SubscribeResult{}, errCheckoutBusy
	}
	// The status until Stripe's events arrive: the checkout changed only
	// the customer and the open checkout, so it is the one read before.
	_, status := s.effective(sub, true, now)
	return SubscribeResult{Status: status, CheckoutURL: sess.URL}, nil
}

// endCheckout ends the claim token without a new session; closed, when
// set, is a session known closed (expired or completed), forgotten.
func (s *Service) endCheckout(companyID uint64, token, closed string) {
	if _, err := s.finishCheckout(companyID, token, closed, nil, ""); err != nil {
		// The claim lapses after checkoutClaimTTL.
		s.log.Error("end a checkout claim", "company", companyID, "err", err)
	}
}

// finishCheckout ends the company's checkout claim token: it forgets the
// session closed (when it is still the recorded one), records opened
// (nil: none) and keeps customer. lost reports a claim another request
// took over: then neither opened nor customer is recorded (the other
// request's session may be of another customer, one made for another
// admin's email, which must be the company's), but closed, known closed at
// the provider, is forgotten all the same.
func (s *Service) finishCheckout(companyID uint64, token, closed string, opened *store.Checkout, customer string) (lost bool, err error) {
	_, err = s.store.UpdateSubscription(companyID, func(sub *store.Subscription) error {
		var co store.Checkout
		if sub.Checkout != nil {
			co = *sub.Checkout
		}
		if closed != "" && co.SessionID == closed {
			co = store.Checkout{Claim: co.Claim, ClaimedAt: co.ClaimedAt}
		}
		lost = co.Claim != token
		if !lost {
			if customer != "" && sub.CustomerID == "" {
				sub.CustomerID = customer
			}
			co.Claim, co.ClaimedAt = "", time.Time{}
			if opened != nil {
				co = *opened
			}
		}
		sub.Checkout = &co
		if co == (store.Checkout{}) {
			sub.Checkout = nil
		}
		return nil
	})
	return lost, err
}

func (s *Service) portal(ctx context.Context, companyID uint64) (string, error) {
	sub, _, err := s.store.Subscription(companyID)
	if err != nil {
		return "", err
	}
	if sub.CustomerID == "" {
		return "", problem.New(problem.Conflict, "The company has no billing account yet: subscribe to a plan first.")
	}
	url, err := s.cfg.Provider.Portal(ctx, sub.CustomerID, s.cfg.PublicURL+"/")
	if err != nil {
		return "", s.providerFailed("portal", companyID, err)
	}
	return url, nil
}
