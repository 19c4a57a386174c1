package web

import (
	"net/http"
	"strconv"

	"github.com/simrelay/simrelay/billing"
)

func (c *Console) billingRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/billing", c.page(member, c.billingPage))
	mux.HandleFunc("POST "+Prefix+"/billing/subscribe", c.action(admin, Prefix+"/billing", c.subscribe))
	mux.HandleFunc("POST "+Prefix+"/billing/portal", c.action(admin, Prefix+"/billing", c.portal))
}

type billingData struct {
	Sub    billing.View
	Stripe bool
	// Credits are the segments sent this period, the overview's figure:
	// shown beside the plan's count so the two read as the two rules they
	// are (docs/billing.md, "Two figures").
	Credits uint64
	Choices []planChoice
}

// planChoice is a listed plan with its button: what choosing it does, said
// from where the company stands (a company on the hidden unlimited plan
// switches to Free, it does not choose it afresh).
type planChoice struct {
	billing.Plan
	Current bool
	Button  string
	// Confirm asks before a switch that lowers a limit.
	Confirm string
}

func planChoices(plans []billing.Plan, sub billing.View, stripe bool) []planChoice {
	out := make([]planChoice, 0, len(plans))
	for _, p := range plans {
		ch := planChoice{Plan: p, Current: p.ID == sub.PlanID}
		switch {
		case ch.Current:
			ch.Button = "Current plan"
		case stripe && p.StripePriceID != "" && p.TrialDays > 0:
			ch.Button = "Start a " + strconv.Itoa(p.TrialDays) + "-day trial of " + p.Name
		case stripe && p.StripePriceID != "":
			ch.Button = "Subscribe to " + p.Name
		default:
			ch.Button = "Switch to " + p.Name
		}
		if !ch.Current && (lower(p.Limits.MessagesPerMonth, sub.Limits.MessagesPerMonth) || lower(p.Limits.Devices, sub.Limits.Devices)) {
			ch.Confirm = "Switch from " + sub.PlanName + " to " + p.Name + "? Its limits are " +
				limit(p.Limits.MessagesPerMonth, "message", "messages") + " a month and " + limit(p.Limits.Devices, "device", "devices") + "."
		}
		out = append(out, ch)
	}
	return out
}

// lower says whether limit a is below limit b (nil is unlimited).
func lower(a, b *int64) bool { return a != nil && (b == nil || *a < *b) }

func (c *Console) billingPage(w http.ResponseWriter, r *http.Request, q *req) error {
	sub, err := c.deps.Billing.Subscription(r.Context(), q.p().CompanyID)
	if err != nil {
		return err
	}
	company := q.p().CompanyID
	from, to := c.period(company)
	sum, err := c.deps.Analytics.DashboardSummary(company, from, to, 0)
	if err != nil {
		return err
	}
	stripe := c.deps.Billing.Stripe()
	data := billingData{Sub: sub, Stripe: stripe, Credits: sum.PeriodSegments, Choices: planChoices(c.deps.Billing.Plans(), sub, stripe)}
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
