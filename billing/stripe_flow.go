package billing

import (
	"context"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// checkout starts a provider checkout for the plan, reusing the company's
// provider customer when it has one.
func (s *Service) checkout(ctx context.Context, in SubscribeInput, plan Plan) (SubscribeResult, error) {
	sub, found, err := s.store.Subscription(in.CompanyID)
	if err != nil {
		return SubscribeResult{}, err
	}
	// One live subscription per company: a second checkout would open a
	// second subscription, billed alongside the first.
	if paying(sub) {
		return SubscribeResult{}, problem.New(problem.Conflict, "The company already has a subscription: change its plan in the billing portal (POST /billing/portal).")
	}
	url, customer, err := s.cfg.Provider.Checkout(ctx, CheckoutInput{
		CompanyID: in.CompanyID, CustomerID: sub.CustomerID, Email: in.Email, Plan: plan, SkipTrial: in.SkipTrial,
		SuccessURL: s.cfg.PublicURL + "/billing/success?session_id={CHECKOUT_SESSION_ID}", CancelURL: s.cfg.PublicURL + "/billing/canceled",
		Instance: s.instance,
	})
	// A customer made before a failed session is kept too, so that the
	// next try reuses it instead of making another.
	if customer != "" && customer != sub.CustomerID {
		if _, serr := s.store.UpdateSubscription(in.CompanyID, func(sub *store.Subscription) error {
			sub.CustomerID = customer
			return nil
		}); serr != nil {
			return SubscribeResult{}, serr
		}
	}
	if err != nil {
		return SubscribeResult{}, s.providerFailed("checkout", in.CompanyID, err)
	}
	// The status until Stripe's events arrive: the checkout changed only
	// the customer, so it is the one read above.
	_, status := s.effective(sub, found, s.now())
	return SubscribeResult{Status: status, CheckoutURL: url}, nil
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
