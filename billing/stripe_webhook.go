package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// The Stripe events the webhook applies; every other type is acknowledged
// and ignored, so a Stripe endpoint that sends more does no harm.
const (
	EventCheckoutCompleted   = "checkout.session.completed"
	EventCheckoutExpired     = "checkout.session.expired"
	EventSubscriptionCreated = "customer.subscription.created"
	EventSubscriptionUpdated = "customer.subscription.updated"
	EventSubscriptionDeleted = "customer.subscription.deleted"
)

var errNoEvent = problem.New(problem.InvalidJSON, "The body is signed but is not a Stripe event (a JSON object with an id, a type and data.object).")

// maxStripeID bounds the ids an event carries (its own, its customer's, its
// subscription's): Stripe's are about 30 bytes (evt_..., cus_..., sub_...).
const maxStripeID = 255

// stripeID reports whether id can be a Stripe object's id: 1 to
// maxStripeID bytes of printable ASCII without spaces. The ids are stored:
// one past the embedded store's key limit (32 KiB) was a 500, which Stripe
// retries for three days, and a NUL byte is text PostgreSQL refuses.
func stripeID(id string) bool {
	if id == "" || len(id) > maxStripeID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// badID refuses a signed event whose id at path no Stripe object has.
func badID(path string) error {
	return problem.New(problem.InvalidJSON, fmt.Sprintf("The event's %s is no Stripe id: at most %d bytes of printable ASCII without spaces.", path, maxStripeID))
}

// signedOutside reports whether a Stripe-Signature header that verified
// names a time more than the library's tolerance (webhook.DefaultTolerance,
// five minutes) before or after now, the service's clock. The library's
// own check reads the machine's clock, and only one way: a delivery signed
// ahead of its time, and caught, would verify until its time had passed
// and the tolerance after it; so it is told to skip it, and this checks
// both ways by the clock the rest of billing keeps. The header is read as
// the library reads it (pairs split at commas, the last t= wins); one with
// no time, or one the library could not read, did not verify.
func signedOutside(header string, now time.Time) bool {
	at, dated := int64(0), false
	for _, pair := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k != "t" {
			continue
		}
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return true
		}
		at, dated = t, true
	}
	tol := int64(webhook.DefaultTolerance / time.Second)
	return !dated || at < now.Unix()-tol || at > now.Unix()+tol
}

// errBadSignature refuses a delivery whose Stripe-Signature does not
// verify its body: missing, malformed, of another secret or body, or
// dated outside the tolerance either way (signedOutside).
var errBadSignature = problem.Invalid("Stripe-Signature", "The Stripe-Signature header does not verify this body with the webhook secret.")

// HandleStripeEvent verifies and applies one Stripe webhook delivery.
// A bad signature is 400; anything signed answers nil (200) once it is
// recorded or judged irrelevant, so Stripe stops retrying it. Each event id
// is applied once, and an event older than the newest applied one for the
// company leaves the subscription's state as it is.
func (s *Service) HandleStripeEvent(_ context.Context, payload []byte, signature string) error {
	if s.cfg.Provider == nil || s.cfg.WebhookSecret == "" {
		return problem.New(problem.NotFound, "Stripe is not configured on this server.")
	}
	ev, err := webhook.ConstructEventWithOptions(payload, signature, s.cfg.WebhookSecret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true, IgnoreTolerance: true})
	// The library checks the signature first, then decodes the body: a
	// body the header does verify, signed in time, but that is no event is
	// the sender's JSON at fault, not its signature.
	if errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) ||
		errors.Is(err, webhook.ErrNoValidSignature) || signedOutside(signature, s.now()) {
		return errBadSignature
	}
	if err != nil {
		return errNoEvent
	}
	if ev.ID == "" || ev.Type == "" || ev.Data == nil || len(ev.Data.Raw) == 0 || ev.Data.Object == nil {
		// JSON, but no event: without data the switch below would read a
		// nil pointer (a 500), without an id the event could not be applied
		// once, and a data.object of null (no object, unlike a string,
		// which the library refuses) would be read as an empty one.
		return errNoEvent
	}
	if !stripeID(ev.ID) {
		return badID("id")
	}
	switch string(ev.Type) {
	case EventCheckoutExpired:
		var cs stripe.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &cs); err != nil {
			return s.badEvent(ev, err)
		}
		// The company's open checkout can no longer be paid (expired in
		// the Stripe dashboard, or at its expiry): it is forgotten, so a
		// subscribe opens a new one and the company may be removed (simrelay
		// admin delete-company refuses one with a checkout still payable).
		// It binds no customer: a session that was never paid makes none
		// the company's.
		return s.apply(ev, s.ownCompany(cs.Metadata), "", false, func(sub *store.Subscription, _ bool) bool {
			co := sub.Checkout
			if co == nil || cs.ID == "" || co.SessionID != cs.ID {
				return false // another checkout, or one already over
			}
			sub.Checkout = nil
			if co.Claim != "" {
				sub.Checkout = &store.Checkout{Claim: co.Claim, ClaimedAt: co.ClaimedAt}
			}
			return false
		})
	case EventCheckoutCompleted:
		var cs stripe.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &cs); err != nil {
			return s.badEvent(ev, err)
		}
		customer, subID := "", ""
		if cs.Customer != nil {
			customer = cs.Customer.ID
		}
		if cs.Subscription != nil {
			subID = cs.Subscription.ID
		}
		if customer != "" && !stripeID(customer) {
			return badID("data.object.customer")
		}
		if subID != "" && !stripeID(subID) {
			return badID("data.object.subscription")
		}
		planID := s.knownPlan(ev, cs.Metadata["plan_id"])
		// Checkout completion binds the customer and the subscription, and
		// stays out of the ordering: it carries no state of the subscription
		// but the first, which it sets on the subscription it binds (see
		// completedStatus); that subscription's own events then follow.
		return s.apply(ev, s.ownCompany(cs.Metadata), customer, false, func(sub *store.Subscription, _ bool) bool {
			skipTrial := false
			if co := sub.Checkout; co != nil && cs.ID != "" && co.SessionID == cs.ID {
				// The company's open checkout is over: a subscribe opens a
				// new one (or answers 409 once the company pays).
				skipTrial = co.SkipTrial
				sub.Checkout = nil
				if co.Claim != "" {
					sub.Checkout = &store.Checkout{Claim: co.Claim, ClaimedAt: co.ClaimedAt}
				}
			}
			switch {
			case subID == "" || sub.ProviderSubID == subID:
				// Nothing to bind, or its events came first: they hold the state.
			case holdsLive(*sub):
				// A second subscription, or a replaced one whose completion
				// comes late: its own events tell which (secondSubscription).
				s.log.Warn("stripe checkout completed for another subscription than the company's live one; not applied",
					"event", ev.ID, "company", sub.CompanyID, "kept", sub.ProviderSubID, "other", subID)
			case sub.ProviderSubID == "" && ev.Created < sub.EventCreated:
				// The company's subscription ended after this completion was
				// made, and a plan set without Stripe since (the free plan,
				// admin set-plan) forgot its id (forgetEnded): a completion
				// that arrives this late (its first deliveries failed) is of
				// that ended subscription, or of one older still. Bound, it
				// made the company an active payer of a plan it no longer
				// pays for, and no event of that subscription would come to
				// end it.
				s.log.Warn("stripe checkout completed before the company's subscription ended; not applied",
					"event", ev.ID, "company", sub.CompanyID, "subscription", subID)
			default:
				sub.ProviderSubID = subID
				if planID != "" {
					sub.PlanID = planID
				}
				if status := completedStatus(cs.PaymentStatus); status != "" {
					sub.Status, sub.TrialEndsAt = status, nil
					if p, ok := s.byID[sub.PlanID]; ok && status == StatusActive && cs.PaymentStatus == stripe.CheckoutSessionPaymentStatusNoPaymentRequired && p.TrialDays > 0 && !skipTrial {
						// Nothing paid yet: the plan's trial (Stripe's trial_end
						// follows with the subscription's event).
						end := time.Unix(ev.Created, 0).UTC().AddDate(0, 0, p.TrialDays)
						sub.Status, sub.TrialEndsAt, sub.TrialUsed = StatusTrialing, &end, true
					}
				}
			}
			return false
		})
	case EventSubscriptionCreated, EventSubscriptionUpdated, EventSubscriptionDeleted:
		var ss stripe.Subscription
		if err := json.Unmarshal(ev.Data.Raw, &ss); err != nil {
			return s.badEvent(ev, err)
		}
		customer := ""
		if ss.Customer != nil {
			customer = ss.Customer.ID
		}
		if customer != "" && !stripeID(customer) {
			return badID("data.object.customer")
		}
		if ss.ID != "" && !stripeID(ss.ID) {
			return badID("data.object.id")
		}
		planID := s.planOf(ev, ss)
		periodStart, periodEnd := ss.CurrentPeriodStart, ss.CurrentPeriodEnd
		if periodStart == 0 && periodEnd == 0 {
			periodStart, periodEnd = itemPeriod(ev.Data.Raw)
		}
		status := stripeStatus(ss.Status)
		if string(ev.Type) == EventSubscriptionDeleted {
			status = StatusCanceled
		}
		deleted := string(ev.Type) == EventSubscriptionDeleted
		return s.apply(ev, s.ownCompany(ss.Metadata), customer, true, func(sub *store.Subscription, stale bool) bool {
			ended := ss.ID != "" && slices.Contains(sub.EndedSubIDs, ss.ID)
			if deleted && ss.ID != "" && !ended {
				// Stripe deletes a subscription once, for good: whatever
				// the order its events arrive in (several in one second
				// apply in arrival order), none after this revives it.
				sub.EndedSubIDs = append(sub.EndedSubIDs, ss.ID)
				if n := len(sub.EndedSubIDs); n > store.MaxEndedSubIDs {
					sub.EndedSubIDs = sub.EndedSubIDs[n-store.MaxEndedSubIDs:]
				}
			}
			if status == StatusTrialing {
				// The company has had its trial, whatever the order of
				// this event: its next checkout has none.
				sub.TrialUsed = true
			}
			if stale {
				return false
			}
			if ended && !deleted {
				s.log.Warn("stripe event for a subscription Stripe deleted; ignored", "event", ev.ID, "type", ev.Type, "subscription", ss.ID, "status", ss.Status)
				return false
			}
			// A company has one live subscription: news of another one (an
			// older, replaced subscription, or a second one billed beside
			// it) does not move its state.
			if ss.ID != "" && ss.ID != sub.ProviderSubID && holdsLive(*sub) {
				if status == StatusCanceled || status == StatusNone {
					s.log.Warn("stripe event for a subscription the company no longer uses; ignored", "event", ev.ID, "subscription", ss.ID)
				} else {
					s.secondSubscription(ev, sub, ss.ID)
				}
				return false
			}
			if ss.ID != "" {
				sub.ProviderSubID = ss.ID
			}
			if planID != "" {
				sub.PlanID = planID
			}
			sub.Status = status
			sub.TrialEndsAt = nil
			if ss.TrialEnd > 0 && status == StatusTrialing {
				t := time.Unix(ss.TrialEnd, 0).UTC()
				sub.TrialEndsAt = &t
			}
			sub.PeriodStart, sub.PeriodEnd = time.Time{}, time.Time{}
			if periodStart > 0 && periodEnd > periodStart {
				sub.PeriodStart = time.Unix(periodStart, 0).UTC()
				sub.PeriodEnd = time.Unix(periodEnd, 0).UTC()
			}
			return true
		})
	default:
		s.log.Debug("stripe event ignored", "event", ev.ID, "type", ev.Type)
		return nil
	}
}

// completedStatus is the status a completed Checkout Session in
// subscription mode tells by its payment_status: paid, the first invoice is
// paid (active); no_payment_required, nothing was due (a trial, or a
// discount of it all: active, made trialing by the caller when the plan has
// a trial); unpaid, a payment still on its way (a bank debit: none, as
// Stripe's incomplete). Empty when the event carries none (the status is
// left to the subscription's events).
func completedStatus(ps stripe.CheckoutSessionPaymentStatus) string {
	switch ps {
	case stripe.CheckoutSessionPaymentStatusPaid, stripe.CheckoutSessionPaymentStatusNoPaymentRequired:
		return StatusActive
	case stripe.CheckoutSessionPaymentStatusUnpaid:
		return StatusNone
	}
	return ""
}

// holdsLive reports whether the company's record holds a live subscription:
// one of any status but canceled and none. Unlike paying, none (a first
// payment still on its way) gives way to another subscription's events:
// one that is live holds the state, should the other's payment arrive too.
func holdsLive(sub store.Subscription) bool {
	return sub.ProviderSubID != "" && sub.Status != StatusCanceled && sub.Status != StatusNone
}

// secondSubscription logs an event of a live subscription other than the
// one the company holds: two checkouts both paid (one opened before an
// upgrade of the server, or whose opening timed out), or one made in the
// Stripe dashboard. The one the company holds stays its subscription, so its
// state does not flip between the two; the other is billed all the same,
// so the operator must cancel (and refund) one at Stripe. Once the held one
// ends, the other's next event makes it the company's.
func (s *Service) secondSubscription(ev stripe.Event, sub *store.Subscription, other string) {
	s.log.Error("stripe: the company has a second live subscription, billed but not applied; cancel one in the Stripe dashboard",
		"event", ev.ID, "type", ev.Type, "company", sub.CompanyID, "kept", sub.ProviderSubID, "second", other, "customer", sub.CustomerID)
}

// stripeStatus maps Stripe's subscription statuses onto the five the API
// shows: unpaid counts as past_due (payment still owed), incomplete as none
// (never paid: the default plan applies), incomplete_expired and paused as
// canceled.
func stripeStatus(st stripe.SubscriptionStatus) string {
	switch st {
	case stripe.SubscriptionStatusTrialing:
		return StatusTrialing
	case stripe.SubscriptionStatusActive:
		return StatusActive
	case stripe.SubscriptionStatusPastDue, stripe.SubscriptionStatusUnpaid:
		return StatusPastDue
	case stripe.SubscriptionStatusIncomplete:
		return StatusNone
	default:
		return StatusCanceled
	}
}

// itemPeriod is the billing period of a subscription's first item: from
// Stripe's API version 2025-03-31 (basil) on, the items carry the period
// (items.data[].current_period_start and _end) and the subscription none.
// Zeros when the object has none.
func itemPeriod(raw json.RawMessage) (start, end int64) {
	var sub struct {
		Items struct {
			Data []struct {
				Start int64 `json:"current_period_start"`
				End   int64 `json:"current_period_end"`
			} `json:"data"`
		} `json:"items"`
	}
	if json.Unmarshal(raw, &sub) != nil || len(sub.Items.Data) == 0 {
		return 0, 0
	}
	return sub.Items.Data[0].Start, sub.Items.Data[0].End
}

// knownPlan is the event's plan id when it names a plan of this server.
func (s *Service) knownPlan(ev stripe.Event, id string) string {
	if id == "" {
		return ""
	}
	if _, ok := s.byID[id]; !ok {
		s.log.Warn("stripe event names a plan this server does not have; plan left as it is", "event", ev.ID, "plan", id)
		return ""
	}
	return id
}

// ownCompany is the metadata's company_id when the metadata carries this
// server's instance mark: a Stripe account may feed several servers (staging
// and production), whose company ids are small integers that collide, so an
// id without the mark is no evidence. Zero when absent.
func (s *Service) ownCompany(meta map[string]string) uint64 {
	if meta[metaInstance] != s.instance {
		return 0
	}
	id, err := strconv.ParseUint(meta["company_id"], 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// planOf is the plan a subscription is on: the plan whose Stripe price its
// first item has (a change made in the Billing Portal shows there), else the
// plan its metadata names. A price that no plan has (one the portal offers
// but the plans file lacks) is warned of once (unknownPrice).
func (s *Service) planOf(ev stripe.Event, ss stripe.Subscription) string {
	unknown := ""
	if ss.Items != nil {
		for _, it := range ss.Items.Data {
			if it != nil && it.Price != nil && it.Price.ID != "" {
				for _, p := range s.plans {
					if p.StripePriceID == it.Price.ID {
						return p.ID
					}
				}
				if unknown == "" {
					unknown = it.Price.ID
				}
			}
		}
	}
	if unknown != "" {
		s.unknownPrice(ev, ss, unknown)
	}
	return s.knownPlan(ev, ss.Metadata["plan_id"])
}

// maxUnknownPrices bounds the prices unknownPrice remembers; past it, each
// event with another such price is warned of.
const maxUnknownPrices = 1000

// unknownPrice warns, once per price for the life of the process, that a
// subscription's price is on no plan of the plans file: the subscription
// keeps the plan its metadata names, and that plan's limits, whatever the
// company pays. Each renewal and change of such a subscription comes
// again; one line per price tells the operator without burying the log.
func (s *Service) unknownPrice(ev stripe.Event, ss stripe.Subscription, price string) {
	s.mu.Lock()
	_, seen := s.unknownPrices[price]
	if !seen && len(s.unknownPrices) < maxUnknownPrices {
		if s.unknownPrices == nil {
			s.unknownPrices = make(map[string]struct{})
		}
		s.unknownPrices[price] = struct{}{}
	}
	s.mu.Unlock()
	if seen {
		return
	}
	s.log.Warn("stripe subscription's price is on no plan of the plans file: the subscription keeps the plan its metadata names, and its limits; add the price to a plan's stripe_price_id (--plans) and restart (warned once per price)",
		"price", price, "event", ev.ID, "subscription", ss.ID, "metadata_plan", ss.Metadata["plan_id"])
}

// apply finds the company (this server's metadata.company_id, then the
// stored customer) and applies fn once per event id. An event that matches
// no company, or whose customer belongs to another one, is logged and
// acknowledged: retrying it would not change that.
func (s *Service) apply(ev stripe.Event, company uint64, customer string, ordered bool, fn func(*store.Subscription, bool) bool) error {
	if company == 0 && customer != "" {
		id, found, err := s.store.CompanyByCustomer(customer)
		if err != nil {
			return err
		}
		if found {
			company = id
		}
	}
	if company == 0 {
		s.log.Warn("stripe event matches no company; ignored", "event", ev.ID, "type", ev.Type)
		return nil
	}
	applied, err := s.store.ApplyProviderEvent(ev.ID, company, customer, ev.Created, ordered, s.now().UTC(), fn)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.log.Warn("stripe event names a company that does not exist; ignored", "event", ev.ID, "company", company)
		return nil
	case errors.Is(err, store.ErrForeignCustomer):
		s.log.Warn("stripe event's customer belongs to another company; ignored", "event", ev.ID, "company", company, "customer", customer)
		return nil
	case err != nil:
		return err
	}
	s.log.Info("stripe event", "event", ev.ID, "type", ev.Type, "company", company, "applied", applied)
	return nil
}

// badEvent acknowledges a signed event whose object cannot be read: Stripe
// sent it, so a retry would carry the same bytes.
func (s *Service) badEvent(ev stripe.Event, err error) error {
	s.log.Error("stripe event object unreadable; ignored", "event", ev.ID, "type", ev.Type, "err", err)
	return nil
}
