package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/problem"
)

// errNoBilling answers the billing routes of a server built without billing
// (some tests); `simrelay serve` always has it.
var errNoBilling = problem.New(problem.NotFound, "Billing is not configured on this server.")

func (s *Server) listPlans(c echo.Context) error {
	if s.deps.Billing == nil {
		return errNoBilling
	}
	return c.JSON(http.StatusOK, map[string][]billing.Plan{"plans": s.deps.Billing.Plans()})
}

func (s *Server) getSubscription(c echo.Context) error {
	if s.deps.Billing == nil {
		return errNoBilling
	}
	v, err := s.deps.Billing.Subscription(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) subscribe(c echo.Context) error {
	if s.deps.Billing == nil {
		return errNoBilling
	}
	var in struct {
		PlanID string `json:"plan_id"`
		// SkipTrial is a boolean input: true/false or 1/0 (settingBool).
		SkipTrial json.RawMessage `json:"skip_trial"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	skip, err := settingBool(in.SkipTrial, "skip_trial")
	if err != nil {
		return err
	}
	p := principal(c)
	out, err := s.deps.Billing.Subscribe(c.Request().Context(), billing.SubscribeInput{CompanyID: p.CompanyID, PlanID: in.PlanID, SkipTrial: skip != nil && *skip})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) billingPortal(c echo.Context) error {
	if s.deps.Billing == nil {
		return errNoBilling
	}
	url, err := s.deps.Billing.Portal(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"url": url})
}

// stripeWebhook takes Stripe's event deliveries: no Authorization, the
// raw body checked against Stripe-Signature. It counts in the general rate
// limit of the sender's IP like every public route; Stripe retries a 429.
func (s *Server) stripeWebhook(c echo.Context) error {
	if s.deps.Billing == nil {
		return errNoBilling
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := s.deps.Billing.HandleStripeEvent(c.Request().Context(), body, c.Request().Header.Get("Stripe-Signature")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"received": true})
}
