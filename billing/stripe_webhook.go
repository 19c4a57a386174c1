package billing

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
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
	EventSubscriptionCreated = "customer.subscription.created"
	EventSubscriptionUpdated = "customer.subscription.updated"
	EventSubscriptionDeleted = "customer.subscription.deleted"
)

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
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		return problem.Invalid("Stripe-Signature", "The Stripe-Signature header does not verify this body with the webhook secret.")
	}
	switch string(ev.Type) {
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
		planID := s.knownPlan(ev, cs.Metadata["plan_id"])
		return s.apply(ev, cs.Metadata["company_id"], customer, func(sub *store.Subscription, stale bool) {
			if customer != "" {
				sub.CustomerID = customer
			}
			if subID != "" {
				sub.ProviderSubID = subID
			}
			if planID != "" && !stale {
				sub.PlanID = planID
			}
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
		planID := s.knownPlan(ev, ss.Metadata["plan_id"])
		status := stripeStatus(ss.Status)
		if string(ev.Type) == EventSubscriptionDeleted {
			status = StatusCanceled
		}
		return s.apply(ev, ss.Metadata["company_id"], customer, func(sub *store.Subscription, stale bool) {
			if customer != "" {
				sub.CustomerID = customer
			}
			if stale {
				return
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
			if ss.CurrentPeriodStart > 0 && ss.CurrentPeriodEnd > ss.CurrentPeriodStart {
				sub.PeriodStart = time.Unix(ss.CurrentPeriodStart, 0).UTC()
				sub.PeriodEnd = time.Unix(ss.CurrentPeriodEnd, 0).UTC()
			}
		})
	default:
		s.log.Debug("stripe event ignored", "event", ev.ID, "type", ev.Type)
		return nil
	}
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

// apply finds the company (metadata.company_id, then the stored customer)
// and applies fn once per event id. An event that matches no company is
// logged and acknowledged: retrying it would not make it match.
func (s *Service) apply(ev stripe.Event, companyMeta, customer string, fn func(*store.Subscription, bool)) error {
	var company uint64
	if id, err := strconv.ParseUint(companyMeta, 10, 64); err == nil && id > 0 {
		company = id
	} else if customer != "" {
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
	applied, err := s.store.ApplyProviderEvent(ev.ID, company, ev.Created, s.now().UTC(), fn)
	if errors.Is(err, store.ErrNotFound) {
		s.log.Warn("stripe event names a company that does not exist; ignored", "event", ev.ID, "company", company)
		return nil
	}
	if err != nil {
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
