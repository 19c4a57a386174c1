package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/problem"
)

// DefaultCompanyDailyStorage is the budget `simrelay serve` sets unless told
// otherwise: 256 MiB a day is about 250,000 ordinary messages (with their
// webhook events), far beyond what one company's phones and API calls make
// in a day, while a hostile or broken client of one tenant adds at most that
// much per day for the operator to notice, not the whole disk in minutes.
const DefaultCompanyDailyStorage = 256 << 20

// ErrStorageBudget is wrapped by a *BudgetError: the company's daily
// storage budget is spent.
var ErrStorageBudget = errors.New("store: the company's daily storage budget is spent")

// BudgetError says whose budget is spent and when it renews.
type BudgetError struct {
	CompanyID uint64
	Limit     int64     // bytes per day
	Used      int64     // bytes added today before this write
	Cost      int64     // bytes this write would have added
	Reset     time.Time // the start of the next UTC day
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("store: company %d has added %d of its %d bytes today; %d more would go over (it renews at %s)",
		e.CompanyID, e.Used, e.Limit, e.Cost, e.Reset.Format(time.RFC3339))
}

func (e *BudgetError) Unwrap() error { return ErrStorageBudget }

// OptOutOverdraft is how far past its daily budget (budget bytes) a company's
// day may go for entries of its opt-out list alone: a recipient's STOP and a
// number an admin adds are kept when the day's budget is spent, since the
// messages accepted before it (queued, scheduled) would otherwise still go
// to the number until the budget renews at midnight. An eighth of the
// budget (32 MiB, about 260,000 numbers, with the default) bounds what a
// flood of made-up STOPs adds; past it they are refused as other writes.
// Without a budget (0), nothing is refused.
func OptOutOverdraft(budget int64) int64 { return budget / 8 }

// NextDay is the start of the UTC day after t's: when a spent budget renews.
func NextDay(t time.Time) time.Time {
	return time.Unix((t.Unix()/86400+1)*86400, 0).UTC()
}

// RetryAfter is the whole seconds from now until the budget renews, at least 1.
func (e *BudgetError) RetryAfter(now time.Time) int {
	return problem.RetrySeconds(e.Reset.Sub(now))
}

// What a write costs beyond the bytes of its text or body: the record's
// other fields and its index keys. Estimates, rounded up, so that a flood of
// tiny messages is paid for too.
const (
	// MessageRowCost is a message's record (its JSON fields besides the
	// text) and its five to seven index entries.
	MessageRowCost = 512
	// DeliveryRowCost is a webhook delivery's row and its due-index key.
	DeliveryRowCost = 320
	// PairingCost is a pairing code's record, kept a day past its expiry.
	PairingCost = 256
	// InvitationCost is an invited user's record, its set-password token
	// and the invitation mail in the outbox.
	InvitationCost = 4096
	// OptOutCost is one number's entry on a company's opt-out list.
	OptOutCost = 128
	// MailRowCost is a company's queued mail (an e-mail webhook entry's)
	// beyond its MailSize: the record's other fields and its index entry.
	MailRowCost = 256
)

// MessageCost is what storing m counts against its company's budget.
func MessageCost(m Message) int64 {
	return int64(len(m.Text)+len(m.Phone)+len(m.ClientID)+len(m.ReceivedAt)) + MessageRowCost
}
