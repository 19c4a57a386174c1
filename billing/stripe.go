package billing

import (
	"context"
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
// package-level stripe.Key), so nothing else in the process shares its key.
type Stripe struct {
	api *client.API
}

// NewStripe builds the Stripe provider; it calls nothing yet.
func NewStripe(cfg StripeConfig) *Stripe {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultStripeTimeout
	}
	bc := &stripe.BackendConfig{
		HTTPClient: &http.Client{Timeout: cfg.Timeout},
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

// Checkout creates the customer when the company has none yet, then a
// Checkout Session in subscription mode for the plan's price. The company
// and plan ride along as client_reference_id and metadata on the session
// and on the subscription it creates, so the webhook can match its events.
func (s *Stripe) Checkout(ctx context.Context, in CheckoutInput) (string, string, error) {
	company := strconv.FormatUint(in.CompanyID, 10)
	meta := map[string]string{"company_id": company, "plan_id": in.Plan.ID, metaInstance: in.Instance}
	customer := in.CustomerID
	if customer == "" {
		p := &stripe.CustomerParams{Metadata: map[string]string{"company_id": company, metaInstance: in.Instance}}
		// Two subscribes at once make one customer, not two.
		p.SetIdempotencyKey("simrelay-customer-" + in.Instance + "-" + company)
		if in.Email != "" {
			p.Email = stripe.String(in.Email)
		}
		p.Context = ctx
		c, err := s.api.Customers.New(p)
		if err != nil {
			return "", "", fmt.Errorf("stripe: create customer: %w", err)
		}
		customer = c.ID
	}
	subData := &stripe.CheckoutSessionSubscriptionDataParams{Metadata: meta}
	if in.Plan.TrialDays > 0 && !in.SkipTrial {
		subData.TrialPeriodDays = stripe.Int64(int64(in.Plan.TrialDays))
	}
	p := &stripe.CheckoutSessionParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModeSubscription)),
		Customer:          stripe.String(customer),
		ClientReferenceID: stripe.String(company),
		SuccessURL:        stripe.String(in.SuccessURL),
		CancelURL:         stripe.String(in.CancelURL),
		LineItems:         []*stripe.CheckoutSessionLineItemParams{{Price: stripe.String(in.Plan.StripePriceID), Quantity: stripe.Int64(1)}},
		SubscriptionData:  subData,
	}
	p.Metadata = meta
	p.Context = ctx
	sess, err := s.api.CheckoutSessions.New(p)
	if err != nil {
		// The customer exists either way: keep it for the next try.
		return "", customer, fmt.Errorf("stripe: create checkout session: %w", err)
	}
	return sess.URL, customer, nil
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
