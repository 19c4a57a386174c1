package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// DefaultStripeTimeout bounds one call to Stripe, so a slow Stripe answers
// the customer with 502 instead of holding the request.
const DefaultStripeTimeout = 20 * time.Second

// StripeConfig is the Stripe provider's configuration.
type StripeConfig struct {
	// Key is the secret API key (sk_...); never logged.
	Key string
	// APIURL replaces Stripe's API base URL (stripe-mock in tests); empty: Stripe's.
	APIURL string
	// Timeout of one call; zero: DefaultStripeTimeout.
	Timeout time.Duration
}

// Stripe is the Provider of Stripe mode. It has its own client (never the
// package-level stripe.Key), so nothing else in the process shares its key,
// and its own connections: a CloseIdleConnections on http.DefaultTransport
// elsewhere in the process (httptest.Server's Close does one) could fail a
// call about to go out on one of them, and calls are not sent again.
type Stripe struct {
	api *client.API
}

// NewStripe builds the Stripe provider; it calls nothing yet.
func NewStripe(cfg StripeConfig) *Stripe {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultStripeTimeout
	}
	bc := &stripe.BackendConfig{
		HTTPClient: &http.Client{Timeout: cfg.Timeout, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		// A failed call is answered 502 at once; the customer retries.
		MaxNetworkRetries: stripe.Int64(0),
		// Errors are logged by the service, with the company they concern.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIURL != "" {
		bc.URL = stripe.String(cfg.APIURL)
	}
	backends := &stripe.Backends{
		API:     stripe.GetBackendWithConfig(stripe.APIBackend, bc),
		Connect: stripe.GetBackendWithConfig(stripe.ConnectBackend, bc),
		Uploads: stripe.GetBackendWithConfig(stripe.UploadsBackend, bc),
	}
	return &Stripe{api: client.New(cfg.Key, backends)}
}

// checkoutLifetime is how long a Checkout Session stays open (Stripe
// allows 30 minutes to 24 hours from its creation; a little under the most,
// so that a clock ahead of Stripe's is not refused).
const checkoutLifetime = 23 * time.Hour

// Checkout creates the customer when the company has none yet, then a
// Checkout Session in subscription mode for the plan's price. The company
// and plan ride along as client_reference_id and metadata on the session
// and on the subscription it creates, so the webhook can match its events.
func (s *Stripe) Checkout(ctx context.Context, in CheckoutInput) (CheckoutSession, error) {
	company := strconv.FormatUint(in.CompanyID, 10)
	meta := map[string]string{"company_id": company, "plan_id": in.Plan.ID, metaInstance: in.Instance}
	out := CheckoutSession{CustomerID: in.CustomerID}
	if out.CustomerID == "" {
		p := &stripe.CustomerParams{Metadata: map[string]string{"company_id": company, metaInstance: in.Instance}}
		// A retry whose first answer was lost gets the customer made then,
		// not a second. Stripe keeps the first answer (a failure too) for a
		// day and refuses the key with other parameters: the key is the
		// email's too, so that another admin (or the API, without one) is
		// not refused for the day.
		email := sha256.Sum256([]byte(in.Email))
		p.SetIdempotencyKey("simrelay-customer-" + in.Instance + "-" + company + "-" + hex.EncodeToString(email[:8]))
		if in.Email != "" {
			p.Email = stripe.String(in.Email)
		}
		p.Context = ctx
		c, err := s.api.Customers.New(p)
		if err != nil {
			return out, fmt.Errorf("stripe: create customer: %w", err)
		}
		out.CustomerID = c.ID
	}
	subData := &stripe.CheckoutSessionSubscriptionDataParams{Metadata: meta}
	if in.Plan.TrialDays > 0 && !in.SkipTrial {
		subData.TrialPeriodDays = stripe.Int64(int64(in.Plan.TrialDays))
	}
	expires := in.Now.Add(checkoutLifetime).Truncate(time.Second)
	p := &stripe.CheckoutSessionParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModeSubscription)),
		Customer:          stripe.String(out.CustomerID),
		ClientReferenceID: stripe.String(company),
		SuccessURL:        stripe.String(in.SuccessURL),
		CancelURL:         stripe.String(in.CancelURL),
		LineItems:         []*stripe.CheckoutSessionLineItemParams{{Price: stripe.String(in.Plan.StripePriceID), Quantity: stripe.Int64(1)}},
		SubscriptionData:  subData,
		ExpiresAt:         stripe.Int64(expires.Unix()),
	}
	p.Metadata = meta
	p.Context = ctx
	sess, err := s.api.CheckoutSessions.New(p)
	if err != nil {
		// The customer exists either way: keep it for the next try.
		return out, fmt.Errorf("stripe: create checkout session: %w", err)
	}
	out.ID, out.URL, out.ExpiresAt = sess.ID, sess.URL, expires
	return out, nil
}

// ExpireCheckout closes a Checkout Session so that it can no longer be
// paid. Stripe expires only an open session: when it refuses, the session
// is read to tell one already expired (or unknown to Stripe) from one
// completed, which reports completed with its subscription.
func (s *Stripe) ExpireCheckout(ctx context.Context, sessionID string) (completed bool, subscription string, err error) {
	p := &stripe.CheckoutSessionExpireParams{}
	p.Context = ctx
	_, err = s.api.CheckoutSessions.Expire(sessionID, p)
	var serr *stripe.Error
	if err == nil {
		return false, "", nil
	}
	if !errors.As(err, &serr) || serr.HTTPStatusCode < 400 || serr.HTTPStatusCode >= 500 {
		return false, "", fmt.Errorf("stripe: expire checkout session: %w", err)
	}
	g := &stripe.CheckoutSessionParams{}
	g.Context = ctx
	sess, gerr := s.api.CheckoutSessions.Get(sessionID, g)
	if errors.As(gerr, &serr) && serr.HTTPStatusCode == http.StatusNotFound {
		return false, "", nil
	}
	if gerr != nil {
		return false, "", fmt.Errorf("stripe: read checkout session after its expiry failed (%v): %w", err, gerr)
	}
	switch sess.Status {
	case stripe.CheckoutSessionStatusComplete:
		if sess.Subscription != nil {
			subscription = sess.Subscription.ID
		}
		return true, subscription, nil
	case stripe.CheckoutSessionStatusExpired:
		return false, "", nil
	}
	return false, "", fmt.Errorf("stripe: expire checkout session (status %q): %w", sess.Status, err)
}

// Portal opens a Billing Portal session for the customer.
func (s *Stripe) Portal(ctx context.Context, customerID, returnURL string) (string, error) {
	p := &stripe.BillingPortalSessionParams{Customer: stripe.String(customerID), ReturnURL: stripe.String(returnURL)}
	p.Context = ctx
	sess, err := s.api.BillingPortalSessions.New(p)
	if err != nil {
		return "", fmt.Errorf("stripe: create billing portal session: %w", err)
	}
	return sess.URL, nil
}
