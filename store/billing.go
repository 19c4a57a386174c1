package store

import (
	"errors"
	"fmt"
	"time"
)

// Subscription is a company's plan and its state with the payment provider.
type Subscription struct {
	CompanyID     uint64     `json:"company_id"`
	PlanID        string     `json:"plan_id"`
	Status        string     `json:"status"`
	TrialEndsAt   *time.Time `json:"trial_ends_at,omitempty"`
	PeriodStart   time.Time  `json:"period_start,omitzero"`
	PeriodEnd     time.Time  `json:"period_end,omitzero"`
	CustomerID    string     `json:"customer_id,omitempty"`
	ProviderSubID string     `json:"provider_subscription_id,omitempty"`
	// EventCreated is the creation time (unix s) of the newest provider
	// event applied: an older one arriving late changes nothing.
	EventCreated int64 `json:"event_created,omitempty"`
	// TrialUsed is set once a provider subscription of the company has
	// been trialing: the company's later checkouts have no trial.
	TrialUsed bool `json:"trial_used,omitempty"`
	// EndedSubIDs are the provider subscriptions of the company the
	// provider deleted, the newest last (at most MaxEndedSubIDs): a
	// deletion is final, so no later event of one of them changes the
	// state, however it is ordered.
	EndedSubIDs []string `json:"ended_subscription_ids,omitempty"`
	// Checkout is the company's provider checkout that may still be paid,
	// or the claim of one being opened; nil when there is none.
	Checkout  *Checkout `json:"checkout,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxEndedSubIDs bounds Subscription.EndedSubIDs: a company whose
// subscriptions end more often than that keeps the newest.
const MaxEndedSubIDs = 16

// Checkout is a company's provider checkout (a Stripe Checkout Session):
// the one opened last, until it is known to be completed or expired, and
// the claim of the request opening one. A company has at most one: a
// second, paid too, would bill a second subscription.
type Checkout struct {
	SessionID string    `json:"session_id,omitempty"`
	URL       string    `json:"url,omitempty"`
	PlanID    string    `json:"plan_id,omitempty"`
	SkipTrial bool      `json:"skip_trial,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Claim marks the request (on any node) opening a checkout since
	// ClaimedAt; empty when none is.
	Claim     string    `json:"claim,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
}

// CheckoutClaimTTL is how long a claim of a checkout being opened
// (Checkout.Claim) holds: one older is of a request or node that stopped
// midway, and is taken over. A company is not removed while its claim
// holds (CheckoutClaimHeld): the checkout that request opens could be paid.
const CheckoutClaimTTL = 2 * time.Minute

// CheckoutClaimHeld says whether co holds a live claim at now: one not
// older than CheckoutClaimTTL, which no other request may take over.
func CheckoutClaimHeld(co *Checkout, now time.Time) bool {
	return co != nil && co.Claim != "" && now.Sub(co.ClaimedAt) < CheckoutClaimTTL
}

// CheckoutPayable says whether co is a provider checkout that can still be
// paid at at: one opened (a session id), not expiring before at. Billing
// answers the same checkout again only while it is payable some time from
// now; a company is not removed while it is payable now (simrelay admin
// delete-company), since its payment would make a subscription the
// provider bills with no company to it. A checkout completed, or expired
// by a later subscribe, is no longer recorded; one expired at the provider
// otherwise stays recorded until its ExpiresAt.
func CheckoutPayable(co *Checkout, at time.Time) bool {
	return co != nil && co.SessionID != "" && at.Before(co.ExpiresAt)
}

// PlanLimits is what a subscription allows now. A negative limit is unlimited.
type PlanLimits struct {
	Messages    int64
	Devices     int64
	PeriodStart time.Time // messages count from here
	PeriodEnd   time.Time // until here
}

// Plans turns a company's subscription (found false: none stored yet) into
// its limits at now. It runs inside write transactions: it must not call
// the store.
type Plans interface {
	Limits(sub Subscription, found bool, now time.Time) PlanLimits
}

// ErrPlanLimit is wrapped by a *PlanLimitError.
var ErrPlanLimit = errors.New("store: the plan's limit is reached")

// PlanLimitError says which limit of the plan a write would go over.
type PlanLimitError struct {
	What      string // "messages" or "devices"
	Limit     int64
	PeriodEnd time.Time // when the message count starts again
	// Used and Asked, for messages: what the period had used and how many
	// the refused write asked for (more than one for a bulk send, which is
	// refused whole when it does not fit in what is left).
	Used, Asked int64
}

func (e *PlanLimitError) Error() string {
	return fmt.Sprintf("store: the plan allows %d %s", e.Limit, e.What)
}

func (e *PlanLimitError) Unwrap() error { return ErrPlanLimit }

// What a *PlanLimitError limits (its What).
const (
	LimitMessages = "messages"
	LimitDevices  = "devices"
)

// CalendarMonth is the UTC calendar month around now: the plan period of a
// company without a billing period of its own.
func CalendarMonth(now time.Time) (time.Time, time.Time) {
	now = now.UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}
