package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Subscription statuses, as GET /billing/subscription shows them.
const (
	StatusTrialing = "trialing"
	StatusActive   = "active"
	StatusPastDue  = "past_due"
	StatusCanceled = "canceled"
	StatusNone     = "none"
)

// Store is the part of the store billing uses.
type Store interface {
	Subscription(companyID uint64) (store.Subscription, bool, error)
	UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error)
	Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error)
	ApplyProviderEvent(eventID string, companyID uint64, customer string, created int64, ordered bool, now time.Time, fn func(sub *store.Subscription, stale bool) bool) (bool, error)
	CompanyByCustomer(customerID string) (uint64, bool, error)
}

// Provider is a payment provider (Stripe). Without one, billing runs in
// self-hosted mode: a change of plan takes effect at once and nothing is charged.
type Provider interface {
	// Checkout starts a paid subscription and returns the session the
	// customer pays on; its CustomerID, the provider's customer to keep, is
	// set also with an error once the customer was made.
	Checkout(ctx context.Context, in CheckoutInput) (CheckoutSession, error)
	// ExpireCheckout closes a checkout session so it can no longer be paid;
	// completed reports one that was paid (or needed no payment) already,
	// with the subscription it made. A session already expired is no error.
	ExpireCheckout(ctx context.Context, sessionID string) (completed bool, subscription string, err error)
	// Portal opens the provider's billing portal for the customer.
	Portal(ctx context.Context, customerID, returnURL string) (url string, err error)
}

// CheckoutInput is what a checkout needs.
type CheckoutInput struct {
	CompanyID  uint64
	CustomerID string // empty: create one
	Email      string
	Plan       Plan
	SkipTrial  bool
	SuccessURL string
	CancelURL  string
	// Instance marks the session and subscription as this server's
	// (metadata simrelay_instance), see Service.ownCompany.
	Instance string
	// Now is when the session is opened: it stays open until
	// ExpiresAt, a fixed time after it.
	Now time.Time
}

// CheckoutSession is a checkout opened at the provider.
type CheckoutSession struct {
	ID         string
	URL        string
	CustomerID string
	ExpiresAt  time.Time
}

// metaInstance is the metadata key of the instance mark.
const metaInstance = "simrelay_instance"

// InstanceMark is the value of metadata simrelay_instance that a server
// with this public URL writes on its Stripe customers, sessions and
// subscriptions: the first 8 bytes of the URL's SHA-256, in hex.
func InstanceMark(publicURL string) string {
	sum := sha256.Sum256([]byte(publicURL))
	return hex.EncodeToString(sum[:8])
}

// Config of the billing service.
type Config struct {
	// Plans replace the built-in ones (BuiltinPlans) when set; validated by New.
	Plans []Plan
	// DefaultPlan is a new company's plan; empty: DefaultPlanSelfHosted, or
	// DefaultPlanStripe with a provider.
	DefaultPlan string
	// PublicURL is where checkout and the portal send the customer back.
	PublicURL string
	// Provider is nil in self-hosted mode.
	Provider Provider
	// WebhookSecret verifies the Stripe-Signature of POST /billing/stripe/webhook (whsec_...).
	WebhookSecret string
}

// The default plans of the two modes.
const (
	DefaultPlanSelfHosted = PlanUnlimited
	DefaultPlanStripe     = PlanFree
)

// Service is billing: plans, subscriptions, limits.
type Service struct {
	cfg   Config
	plans []Plan
	byID  map[string]Plan
	// instance marks what this server puts in Stripe: a hash of its public
	// URL, so that another server on the same Stripe account (staging,
	// production) never takes this one's events for its own companies.
	instance string
	store    Store
	log      *slog.Logger
	now      func() time.Time
	// hold cuts a checkout's calls to the provider: checkoutHold.
	hold time.Duration

	mu sync.Mutex
	// unknownPrices are the Stripe prices of no plan warned of already
	// (unknownPrice).
	unknownPrices map[string]struct{}
}

// New checks the configuration; the error names the plan and field at fault.
func New(cfg Config, st Store, log *slog.Logger, now func() time.Time) (*Service, error) {
	plans := cfg.Plans
	if plans == nil {
		plans = BuiltinPlans()
	}
	if err := ValidatePlans(plans); err != nil {
		return nil, err
	}
	if cfg.DefaultPlan == "" {
		cfg.DefaultPlan = DefaultPlanSelfHosted
		if cfg.Provider != nil {
			cfg.DefaultPlan = DefaultPlanStripe
		}
	}
	s := &Service{cfg: cfg, plans: plans, byID: map[string]Plan{}, store: st, log: log, now: now, instance: InstanceMark(cfg.PublicURL), hold: checkoutHold}
	for _, p := range plans {
		s.byID[p.ID] = p
	}
	if _, ok := s.byID[cfg.DefaultPlan]; !ok {
		return nil, fmt.Errorf("default plan %q: no plan of that id", cfg.DefaultPlan)
	}
	if cfg.Provider != nil {
		for _, p := range plans {
			if !p.Hidden && p.Price.Amount > 0 && p.StripePriceID == "" {
				return nil, fmt.Errorf("plan %q: field stripe_price_id: a paid plan needs its Stripe price id when Stripe is on", p.ID)
			}
		}
	}
	return s, nil
}

// Stripe reports whether a payment provider is configured.
func (s *Service) Stripe() bool { return s.cfg.Provider != nil }

// Plans are the plans GET /plans lists: all but the hidden ones.
func (s *Service) Plans() []Plan {
	out := make([]Plan, 0, len(s.plans))
	for _, p := range s.plans {
		if !p.Hidden {
			out = append(out, p)
		}
	}
	return out
}

// Plan returns a plan by id, hidden ones included.
func (s *Service) Plan(id string) (Plan, bool) {
	p, ok := s.byID[id]
	return p, ok
}

// effective is the plan whose limits apply and the status to show. Before
// any change of plan the company is on the default plan, active. A canceled
// subscription falls back to the default plan's limits; past_due keeps the
// plan's limits while the provider retries the payment (its dunning
// decides when to cancel). A plan no longer in the plans file counts as the
// default plan. In self-hosted mode an ended trial shows active.
func (s *Service) effective(sub store.Subscription, found bool, now time.Time) (Plan, string) {
	def := s.byID[s.cfg.DefaultPlan]
	if !found || sub.PlanID == "" {
		return def, StatusActive
	}
	status := sub.Status
	if status == "" {
		status = StatusNone
	}
	if status == StatusTrialing && s.cfg.Provider == nil && sub.TrialEndsAt != nil && !now.Before(*sub.TrialEndsAt) {
		status = StatusActive
	}
	p, ok := s.byID[sub.PlanID]
	if !ok || status == StatusCanceled || status == StatusNone {
		return def, status
	}
	return p, status
}

// period is the span messages count over: the provider's billing period
// while it is current, else the UTC calendar month.
func (s *Service) period(sub store.Subscription, now time.Time) (time.Time, time.Time) {
	if s.cfg.Provider != nil && !sub.PeriodStart.IsZero() && sub.PeriodEnd.After(sub.PeriodStart) && !now.Before(sub.PeriodStart) {
		// Past the period Stripe last sent, until its renewal event arrives,
		// the next periods follow on from it (not the calendar month, whose
		// slot would count the same messages twice or not at all).
		from, to := sub.PeriodStart.UTC(), sub.PeriodEnd.UTC()
		for i := 0; !now.Before(to) && i < 1200; i++ {
			from, to = to, nextPeriodEnd(from, to)
		}
		return from, to
	}
	now = now.UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}

// window is the span a plan's messages_per_month counts over: the period
// (period) when it is a month long or shorter; within a longer one (a
// yearly plan's Stripe period), the month of it that holds now, months
// counted from the period's start. The whole year was the window: a yearly
// plan of 2,000 messages a month refused the 2,001st message of the year.
// Each month starts on the period's day of the month, or on the month's
// last day when it has no such day (a year from 31 January: 28 February,
// 31 March, 30 April ...), as Stripe's own months do: a month added to the
// one before (31 January, 3 March, 3 April ...) drifted, and a year from 31
// August had 13 months' allowances.
func (s *Service) window(sub store.Subscription, now time.Time) (time.Time, time.Time) {
	start, to := s.period(sub, now)
	from := start
	for i := 1; i <= 1200; i++ {
		next := addMonths(start, i)
		if !next.Before(to) {
			break
		}
		if now.Before(next) {
			return from, next
		}
		from = next
	}
	return from, to
}

// addMonths is t n months later, on t's day of the month or, when the month
// has no such day, on its last day.
func addMonths(t time.Time, n int) time.Time {
	first := time.Date(t.Year(), t.Month()+time.Month(n), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(t.Day(), last)-1)
}

// nextPeriodEnd is the end of the period after [from, to): a month or a
// year later when that is what the period was, else as long again.
func nextPeriodEnd(from, to time.Time) time.Time {
	switch {
	case to.Equal(from.AddDate(0, 1, 0)):
		return to.AddDate(0, 1, 0)
	case to.Equal(from.AddDate(1, 0, 0)):
		return to.AddDate(1, 0, 0)
	}
	return to.Add(to.Sub(from))
}

func orUnlimited(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}

// Limits implements store.Plans: it runs inside the store's write
// transactions and reads nothing but its arguments.
func (s *Service) Limits(sub store.Subscription, found bool, now time.Time) store.PlanLimits {
	p, _ := s.effective(sub, found, now)
	from, to := s.window(sub, now)
	return store.PlanLimits{Messages: orUnlimited(p.Limits.MessagesPerMonth), Devices: orUnlimited(p.Limits.Devices), PeriodStart: from, PeriodEnd: to}
}

// DeviceLimit is how many devices the company's plan allows now, -1 for
// no limit: the limit a phone's registration is held to (Limits).
func (s *Service) DeviceLimit(companyID uint64) (int64, error) {
	sub, found, err := s.store.Subscription(companyID)
	if err != nil {
		return 0, err
	}
	return s.Limits(sub, found, s.now()).Devices, nil
}

// Period is the span the company's plan counts its messages over now
// (httpapi.Period): the billing period, or its current month when it is
// longer (window). The dashboard's creditsUsed counts over it, as
// usage.messages_this_period does: a yearly plan's credits counted the whole
// year beside the month's messages, and read a record for each of its days.
func (s *Service) Period(companyID uint64) (time.Time, time.Time) {
	sub, _, err := s.store.Subscription(companyID)
	if err != nil {
		s.log.Error("read subscription for the period", "company", companyID, "err", err)
	}
	return s.window(sub, s.now())
}

// View is GET /billing/subscription.
type View struct {
	PlanID           string  `json:"plan_id"`
	PlanName         string  `json:"plan_name"`
	Status           string  `json:"status"`
	TrialEndsAt      *string `json:"trial_ends_at"`
	CurrentPeriodEnd string  `json:"current_period_end"`
	Limits           Limits  `json:"limits"`
	Usage            Usage   `json:"usage"`
}

// Usage is what the company has used in the current period.
type Usage struct {
	MessagesThisPeriod int64 `json:"messages_this_period"`
	Devices            int   `json:"devices"`
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Subscription is the company's subscription with its limits and usage.
func (s *Service) Subscription(_ context.Context, companyID uint64) (View, error) {
	sub, found, err := s.store.Subscription(companyID)
	if err != nil {
		return View{}, err
	}
	now := s.now()
	limitsPlan, status := s.effective(sub, found, now)
	shown := limitsPlan
	if p, ok := s.byID[sub.PlanID]; found && ok {
		shown = p
	}
	_, to := s.period(sub, now)
	from, _ := s.window(sub, now)
	msgs, devs, err := s.store.Usage(companyID, from)
	if err != nil {
		return View{}, err
	}
	v := View{PlanID: shown.ID, PlanName: shown.Name, Status: status, CurrentPeriodEnd: to.UTC().Format(timeLayout),
		Limits: limitsPlan.Limits, Usage: Usage{MessagesThisPeriod: msgs, Devices: devs}}
	if found && sub.TrialEndsAt != nil {
		t := sub.TrialEndsAt.UTC().Format(timeLayout)
		v.TrialEndsAt = &t
	}
	return v, nil
}

// SubscribeInput is POST /billing/subscribe.
type SubscribeInput struct {
	CompanyID uint64
	Email     string // the admin's, for a new provider customer
	PlanID    string
	SkipTrial bool
}

// SubscribeResult is POST /billing/subscribe's answer.
type SubscribeResult struct {
	Status      string `json:"status"`
	CheckoutURL string `json:"checkout_url,omitempty"`
}

// Subscribe changes the company's plan: at once in self-hosted mode
// (trialing while the plan has trial days and skip_trial is false, else
// active), through a provider checkout otherwise.
func (s *Service) Subscribe(ctx context.Context, in SubscribeInput) (SubscribeResult, error) {
	res, err := s.subscribe(ctx, in)
	if errors.Is(err, store.ErrNotFound) {
		// Removed, or closing (store.Backend.MarkCompanyClosing), since the
		// request's credential was checked: its subscription takes no write.
		return SubscribeResult{}, errCompanyGone
	}
	return res, err
}

// errCompanyGone answers a request of a company removed, or being removed,
// since its credential was checked, as a removed company's ids answer.
var errCompanyGone = problem.New(problem.NotFound, "No such company: it has been closed.")

func (s *Service) subscribe(ctx context.Context, in SubscribeInput) (SubscribeResult, error) {
	if in.PlanID == "" {
		return SubscribeResult{}, problem.Invalid("plan_id", "is required")
	}
	plan, ok := s.byID[in.PlanID]
	if !ok || plan.Hidden {
		return SubscribeResult{}, problem.Invalid("plan_id", "names no plan of GET /plans")
	}
	if s.cfg.Provider != nil && plan.StripePriceID != "" {
		return s.checkout(ctx, in, plan)
	}
	now := s.now().UTC()
	sub, err := s.store.UpdateSubscription(in.CompanyID, func(sub *store.Subscription) error {
		// A plan with no Stripe price (free) needs no checkout; a company
		// paying for a subscription leaves it in the Billing Portal first.
		// Judged in the write: a Stripe event applied after a read before
		// it (the checkout just paid) was overwritten with this plan.
		if s.cfg.Provider != nil && paying(*sub) {
			return problem.New(problem.Conflict, "The company pays for a subscription: cancel it in the billing portal (POST /billing/portal); it returns to the default plan when it ends.")
		}
		forgetEnded(sub)
		sub.PlanID, sub.Status, sub.TrialEndsAt, sub.UpdatedAt = plan.ID, StatusActive, nil, now
		if plan.TrialDays > 0 && !in.SkipTrial {
			end := now.AddDate(0, 0, plan.TrialDays)
			sub.Status, sub.TrialEndsAt = StatusTrialing, &end
		}
		return nil
	})
	if err != nil {
		return SubscribeResult{}, err
	}
	return SubscribeResult{Status: sub.Status}, nil
}

// paying reports whether the company has a provider subscription that is
// billed or may still be: any but a canceled one. none is a first payment
// still on its way (Stripe's incomplete: a bank debit), which becomes active
// when it arrives; a second subscription opened meanwhile would be billed
// alongside it.
func paying(sub store.Subscription) bool {
	return sub.ProviderSubID != "" && sub.Status != StatusCanceled
}

// forgetEnded forgets the company's provider subscription when it has
// ended (canceled) as a plan is set without the provider:
// its id kept under the new plan's status would read as a live
// subscription (paying), so every subscribe would answer 409 and a new
// subscription's events would be taken for a second one's.
func forgetEnded(sub *store.Subscription) {
	if !paying(*sub) {
		sub.ProviderSubID = ""
	}
}

// SetPlan puts a company on a plan, active, without a provider: the
// operator's `simrelay admin set-plan`. Hidden plans are allowed.
func (s *Service) SetPlan(companyID uint64, planID string) (store.Subscription, error) {
	plan, ok := s.byID[planID]
	if !ok {
		return store.Subscription{}, fmt.Errorf("no plan %q", planID)
	}
	sub, err := s.store.UpdateSubscription(companyID, func(sub *store.Subscription) error {
		forgetEnded(sub)
		sub.PlanID, sub.Status, sub.TrialEndsAt, sub.UpdatedAt = plan.ID, StatusActive, nil, s.now().UTC()
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return sub, fmt.Errorf("no company %d", companyID)
	}
	return sub, err
}

// Portal opens the provider's billing portal; 409 billing_disabled in self-hosted mode.
func (s *Service) Portal(ctx context.Context, companyID uint64) (string, error) {
	if s.cfg.Provider == nil {
		return "", problem.New(problem.BillingDisabled, "Billing is off on this server (self-hosted mode): there is no billing portal.")
	}
	return s.portal(ctx, companyID)
}

// providerFailed logs a failed provider call and answers 502 without its details.
func (s *Service) providerFailed(what string, companyID uint64, err error) error {
	s.log.Error("payment provider call failed", "call", what, "company", companyID, "err", err)
	return problem.New(problem.PaymentProviderError, "The payment provider did not complete the request; try again later.")
}
