package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/store"
)

// adminDeleteCompany removes a company with every record of it
// (store.CompanyRemoval): the way to erase a customer. --confirm must
// name the company exactly, and a company that pays through a payment
// provider's subscription not canceled yet is refused, since the provider
// would go on billing it; so is one whose provider checkout can still be
// paid (store.CheckoutPayable), which would make such a subscription,
// unless --expired-checkout names it (expired at the provider by hand),
// and so is one whose checkout is being opened (billing's claim,
// store.CheckoutClaimHeld). These looks and the company's closing mark
// are one transaction (store.Backend.MarkCompanyClosing), so a checkout
// claimed after it is refused by the store. The removal runs in steps of
// a bounded size, each its own transaction, credentials first and the
// company's record last: a run stopped midway (Ctrl-C, a crash) leaves
// the company closing, without its credentials, and the same command run
// again finishes it.
func adminDeleteCompany(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("delete-company", stderr)
	company := fs.Uint64("company", 0, "the company's id (required)")
	confirm := fs.String("confirm", "", "the company's name, exactly as stored (required): the command removes the company only if it is this one")
	expired := fs.String("expired-checkout", "", "the company's Stripe Checkout Session (cs_...) that is expired in the Stripe dashboard, where the server was not told (its webhook endpoint does not send checkout.session.expired): the command then goes on")
	fs.Usage = flagUsage(fs, "Usage: simrelay admin delete-company --company ID --confirm NAME [--expired-checkout CS_ID] [--data-dir D | --database-url URL]\n\n")
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	if *company == 0 {
		return usageError{fmt.Errorf("--company: the company's id is required")}
	}
	if *confirm == "" {
		return usageError{fmt.Errorf("--confirm: the company's name is required, exactly as stored")}
	}
	where.existing = true
	st, err := openBackend(ctx, *where)
	if err != nil {
		return err
	}
	defer st.Close()
	return deleteCompany(ctx, st, *company, *confirm, *expired, stdout)
}

// deleteCompany removes the company named by id and confirm from st, as
// admin delete-company says. Its clock is the database server's on
// PostgreSQL (backendClock), by which the nodes stamp a checkout's claim
// and its end: on a machine whose clock is off, the command would
// otherwise take a checkout still being opened for a lapsed one (its
// clock ahead) and remove a company whose checkout can then be paid.
func deleteCompany(ctx context.Context, st backend, company uint64, confirm, expired string, stdout io.Writer) error {
	clock := backendClock(st)
	c, err := st.Company(company)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no company %d", company)
	}
	if err != nil {
		return err
	}
	if c.Name != confirm {
		return usageError{fmt.Errorf("--confirm %q is not the name of company %d, which is %q: nothing was removed", confirm, c.ID, c.Name)}
	}
	// The look at the subscription and the closing mark are one
	// transaction: a checkout claimed after it is refused by the store.
	if _, err := st.MarkCompanyClosing(c.ID, clock(), func(c store.Company, sub store.Subscription, found bool) error {
		now := clock()
		co := sub.Checkout
		switch store.RemovalBlocked(sub, found, now) {
		case store.RemovalSubscription:
			return refusal{fmt.Errorf("company %d pays through the Stripe subscription %s, which is %s, not canceled: cancel it in Stripe first (docs/billing.md), and run the command once Stripe's event has reached the server; nothing was removed",
				c.ID, sub.ProviderSubID, orNone(sub.Status))}
		case store.RemovalCheckoutPayable:
			switch expired {
			case co.SessionID:
				if store.CheckoutClaimHeld(co, now) {
					return checkoutOpening(c.ID)
				}
			case "":
				return refusal{fmt.Errorf("company %d has the Stripe Checkout Session %s, which can be paid until %s: paid after the removal, it would make a subscription Stripe bills; expire it in the Stripe dashboard and run the command again once Stripe's checkout.session.expired event has reached the server (or with --expired-checkout %s where the webhook endpoint does not send that event), or run it after that time; nothing was removed",
					c.ID, co.SessionID, co.ExpiresAt.UTC().Format(time.RFC3339), co.SessionID)}
			default:
				return refusal{fmt.Errorf("--expired-checkout %s is not the company's checkout, %s, which can be paid until %s: nothing was removed",
					expired, co.SessionID, co.ExpiresAt.UTC().Format(time.RFC3339))}
			}
		case store.RemovalCheckoutOpening:
			return checkoutOpening(c.ID)
		}
		return nil
	}); err != nil {
		var r refusal
		if errors.As(err, &r) {
			return r.error
		}
		return err
	}
	total, err := account.RemoveCompany(ctx, st, c.ID)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("stopped (%w) after removing %d messages and %d other records of company %d: the company is still there, without its credentials; run the same command again to finish", ctx.Err(), total.Messages, total.Records, c.ID)
	case err != nil:
		return fmt.Errorf("%w; run the same command again to finish", err)
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"companyId": c.ID, "deleted": true,
		"messages": total.Messages, "users": total.Users, "devices": total.Devices, "records": total.Records})
}

// refusal is the reason a company is not removed, as the command says it.
type refusal struct{ error }

// checkoutOpening refuses a company whose checkout is being opened.
func checkoutOpening(companyID uint64) error {
	return refusal{fmt.Errorf("a Stripe checkout is being opened for company %d (a subscribe under way, for up to %s): what it opens could be paid after the removal; run the command again in a few minutes; nothing was removed",
		companyID, store.CheckoutClaimTTL)}
}

// orNone is s, or "none" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
