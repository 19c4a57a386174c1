package store

import (
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
	ID            uint64    `json:"id"`
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
