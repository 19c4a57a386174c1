package sms

import (
	"errors"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// MaxInboundChars bounds an inbound message's text. A real SMS is at most a
// few thousand characters even when concatenated (255 parts of 153); ten
// thousand leaves room for long WhatsApp or iMessage texts, and keeps a
// phone from storing (and fanning out to webhooks) 64 KiB frames in a loop.
const MaxInboundChars = 10000

// errInboundTooLong refuses an inbound text over MaxInboundChars.
var errInboundTooLong = problem.Invalid("message", fmt.Sprintf("must be at most %d characters", MaxInboundChars))

// budgetRefusal turns a spent daily storage budget into what clients see:
// storage_budget_exceeded (429 on the API) with Retry-After until the
// budget renews at the next UTC midnight, and the plan's messages used up
// into plan_limit_reached (429) with Retry-After until the billing period
// renews, both rounded up to whole seconds. Other errors pass unchanged.
func budgetRefusal(err error, now time.Time) error {
	var pl *store.PlanLimitError
	if errors.As(err, &pl) {
		wait := problem.RetrySeconds(pl.PeriodEnd.Sub(now))
		return &problem.Error{Code: problem.PlanLimitReached, RetryAfter: wait,
			Message: messageLimitMessage(pl.Limit, pl.Used, pl.Asked, pl.PeriodEnd)}
	}
	var be *store.BudgetError
	if !errors.As(err, &be) {
		return err
	}
	wait := be.RetryAfter(now)
	return &problem.Error{
		Code: problem.StorageBudgetExceeded, RetryAfter: wait,
		Message: fmt.Sprintf("The company has stored its %s of messages for today (UTC); the budget renews in %s.", problem.Count(be.Limit, "byte"), problem.Count(wait, "second")),
	}
}

// messageLimitMessage refuses asked messages (a bulk send's are refused
// whole) to a company whose plan allows limit messages in the billing period
// that ends at end, used of them used. A bulk send that does not fit in
// what is left is told how many are left, which it may send now: "they are
// used" would have it wait for the period's end with most of them unused.
func messageLimitMessage(limit, used, asked int64, end time.Time) string {
	renews := end.UTC().Format(time.RFC3339)
	if left := limit - used; asked > 1 && left > 0 {
		verb := "are"
		if used == 1 {
			verb = "is"
		}
		return fmt.Sprintf("The plan allows %s per billing period and %d of them %s used: the %s of this request do not fit in the %d left. Send at most %d now, or the rest once the period renews at %s, or choose a larger plan.",
			problem.Count(limit, "message"), used, verb, problem.Count(asked, "message"), left, left, renews)
	}
	all := "they are used"
	if limit == 1 {
		all = "it is used"
	}
	return fmt.Sprintf("The plan allows %s per billing period and %s; it renews at %s, or choose a larger plan.", problem.Count(limit, "message"), all, renews)
}
