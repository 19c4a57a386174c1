package web

import (
	"net/http"

	"github.com/simrelay/simrelay/billing"
)

func (c *Console) billingRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/billing", c.page(member, c.billingPage))
	mux.HandleFunc("POST "+Prefix+"/billing/subscribe", c.action(admin, Prefix+"/billing", c.subscribe))
	mux.HandleFunc("POST "+Prefix+"/billing/portal", c.action(admin, Prefix+"/billing", c.portal))
}

type billingData struct {
	Plans  []billing.Plan
	Sub    billing.View
	Stripe bool
}

func (c *Console) billingPage(w http.ResponseWriter, r *http.Request, q *req) error {
	sub, err := c.deps.Billing.Subscription(r.Context(), q.p().CompanyID)
	if err != nil {
		return err
	}
	data := billingData{Plans: c.deps.Billing.Plans(), Sub: sub, Stripe: c.deps.Billing.Stripe()}
	c.render(w, r, http.StatusOK, "billing", c.viewFor(q, "Billing", data))
	return nil
}

func (c *Console) subscribe(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	out, err := c.deps.Billing.Subscribe(r.Context(), billing.SubscribeInput{CompanyID: q.p().CompanyID, Email: q.user.Email,
		PlanID: r.PostFormValue("plan_id"), SkipTrial: r.PostFormValue("skip_trial") == "true"})
	if err != nil {
		return outcome{}, err
	}
	if out.CheckoutURL != "" {
		return outcome{Redirect: out.CheckoutURL}, nil
	}
	return outcome{Notice: "Subscription changed: " + out.Status + "."}, nil
}

func (c *Console) portal(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	url, err := c.deps.Billing.Portal(r.Context(), q.p().CompanyID)
	if err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: url}, nil
}
