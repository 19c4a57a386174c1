package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/simrelay/simrelay/store"
)

// companyRemovalBatch is about how many records one transaction of a
// company's removal takes (store.CompanyRemoval): some milliseconds of the
// embedded store's single writer, or of row locks on PostgreSQL, each.
const companyRemovalBatch = 1000

// adminDeleteCompany removes a company with every record of it
// (store.CompanyRemoval): the way to erase a customer. --confirm must
// name the company exactly, and a company that pays through a payment
// provider's subscription not canceled yet is refused, since the provider
// would go on billing it; so is one whose provider checkout can still be
// paid (store.CheckoutPayable), which would make such a subscription,
// unless --expired-checkout names it (expired at the provider by hand).
// The removal runs in steps of a bounded size, each its own transaction,
// credentials first and the company's record last: a run stopped midway
// (Ctrl-C, a crash) leaves the company, without its credentials, and the
// same command run again finishes it.
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
	c, err := st.Company(*company)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no company %d", *company)
	}
	if err != nil {
		return err
	}
	if c.Name != *confirm {
		return usageError{fmt.Errorf("--confirm %q is not the name of company %d, which is %q: nothing was removed", *confirm, c.ID, c.Name)}
	}
	sub, found, err := st.Subscription(c.ID)
	if err != nil {
		return err
	}
	if found && store.SubscriptionLive(sub) {
		return fmt.Errorf("company %d pays through the Stripe subscription %s, which is %s, not canceled: cancel it in Stripe first (docs/billing.md), and run the command once Stripe's event has reached the server; nothing was removed",
			c.ID, sub.ProviderSubID, orNone(sub.Status))
	}
	if co := sub.Checkout; found && store.CheckoutPayable(co, time.Now()) {
		switch *expired {
		case co.SessionID:
		case "":
			return fmt.Errorf("company %d has the Stripe Checkout Session %s, which can be paid until %s: paid after the removal, it would make a subscription Stripe bills; expire it in the Stripe dashboard and run the command again once Stripe's checkout.session.expired event has reached the server (or with --expired-checkout %s where the webhook endpoint does not send that event), or run it after that time; nothing was removed",
				c.ID, co.SessionID, co.ExpiresAt.UTC().Format(time.RFC3339), co.SessionID)
		default:
			return fmt.Errorf("--expired-checkout %s is not the company's checkout, %s, which can be paid until %s: nothing was removed",
				*expired, co.SessionID, co.ExpiresAt.UTC().Format(time.RFC3339))
		}
	}
	var total store.CompanyRemoval
	for !total.Done {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped (%w) after removing %d messages and %d other records of company %d: the company is still there, without its credentials; run the same command again to finish", err, total.Messages, total.Records, c.ID)
		}
		r, err := st.RemoveCompanyStep(c.ID, companyRemovalBatch)
		if err != nil {
			return fmt.Errorf("%w; run the same command again to finish", err)
		}
		total.Add(r)
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"companyId": c.ID, "deleted": true,
		"messages": total.Messages, "users": total.Users, "devices": total.Devices, "records": total.Records})
}

// orNone is s, or "none" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
