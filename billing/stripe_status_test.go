package billing

import (
	"testing"

	"github.com/stripe/stripe-go/v76"
)

// Every status Stripe sends maps onto one of the five the API shows.
func TestStripeStatus(t *testing.T) {
	t.Parallel()
	for in, want := range map[stripe.SubscriptionStatus]string{
		stripe.SubscriptionStatusTrialing:          StatusTrialing,
		stripe.SubscriptionStatusActive:            StatusActive,
		stripe.SubscriptionStatusPastDue:           StatusPastDue,
		stripe.SubscriptionStatusUnpaid:            StatusPastDue,
		stripe.SubscriptionStatusIncomplete:        StatusNone,
		stripe.SubscriptionStatusIncompleteExpired: StatusCanceled,
		stripe.SubscriptionStatusPaused:            StatusCanceled,
		stripe.SubscriptionStatusCanceled:          StatusCanceled,
	} {
		if got := stripeStatus(in); got != want {
			t.Errorf("stripeStatus(%s): got %s, want %s", in, got, want)
		}
	}
}
