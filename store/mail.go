package store

import (
	"errors"
	"fmt"
	"time"
)

// Mail states.
const (
	MailPending = "pending" // waiting for (another) SMTP attempt
	MailSent    = "sent"    // accepted by the SMTP server
	MailLogged  = "logged"  // no SMTP server configured: written to the log, kept here to read
	MailFailed  = "failed"  // gave up after the last attempt
)

// Mail is one e-mail in the persisted outbox.
type Mail struct {
	ID uint64 `json:"id"`
	// CompanyID is the company whose webhook entry the mail delivers
	// (AppendCompanyMail): counted in that company's mail outbox bound and
	// its storage budget. 0 for the server's own account mails
	// (verification, password reset, invitation), which AppendMail queues
	// outside any company's bound.
	CompanyID     uint64    `json:"company_id,omitempty"`
	To            string    `json:"to"`
	Subject       string    `json:"subject"`
	Text          string    `json:"text"`
	HTML          string    `json:"html"`
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	SentAt        time.Time `json:"sent_at,omitzero"`
}

// MailLimits bound how many mails one company may have pending in the
// outbox (AppendCompanyMail), so that a company whose e-mail webhook
// entries keep producing mail while the SMTP relay is down cannot grow the
// outbox the whole server shares. Zero fields mean no limit.
type MailLimits struct {
	// MaxPending is how many of the company's mails may be pending.
	MaxPending int
	// MaxBytes is how many bytes (MailSize) they may hold.
	MaxBytes int64
}

// MailSize is the bytes of a mail the company's bound counts: its
// recipient, subject and bodies.
func MailSize(m Mail) int64 {
	return int64(len(m.To) + len(m.Subject) + len(m.Text) + len(m.HTML))
}

// ErrMailOutboxFull is wrapped by a *MailOutboxFullError: the company's
// pending mails are at its bound, so the mail was not queued.
var ErrMailOutboxFull = errors.New("store: the company's mail outbox is full")

// MailOutboxFullError says whose outbox is full and by how much.
type MailOutboxFullError struct {
	CompanyID    uint64
	Pending      int   // the company's pending mails before this one
	PendingBytes int64 // their bytes (MailSize)
	Limits       MailLimits
}

func (e *MailOutboxFullError) Error() string {
	return fmt.Sprintf("the company's mail outbox is full (%d mails pending, %d bytes; the limits are %d and %d)",
		e.Pending, e.PendingBytes, e.Limits.MaxPending, e.Limits.MaxBytes)
}

func (e *MailOutboxFullError) Unwrap() error { return ErrMailOutboxFull }

// Over reports whether adding a mail of size bytes to pending mails of
// pendingBytes goes over lim.
func (lim MailLimits) Over(pending int, pendingBytes, size int64) bool {
	return lim.MaxPending > 0 && pending+1 > lim.MaxPending || lim.MaxBytes > 0 && pendingBytes+size > lim.MaxBytes
}
