package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	netmail "net/mail"
	"strings"
	"sync/atomic"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/wakeup"
)

// Outbox is the durable queue the service works from; *boltstore.Store is one.
type Outbox interface {
	AppendMail(*store.Mail) error
	// AppendCompanyMail appends a company's mail within lim, or refuses it
	// with a *store.MailOutboxFullError.
	AppendCompanyMail(*store.Mail, store.MailLimits) error
	UpdateMail(uint64, func(*store.Mail)) (store.Mail, error)
	Mails(bool) ([]store.Mail, error)
	// ClaimMail takes a pending mail for one attempt: false when it is no
	// longer pending or (on a cluster) another node attempts it.
	ClaimMail(uint64) (store.Mail, bool, error)
}

// ErrInvalidMessage is wrapped by Send when a message cannot be sent as
// given: a bad recipient address, an empty or multi-line subject, or no text.
var ErrInvalidMessage = errors.New("mail: invalid message")

// Option tunes a Service beyond its Config; tests use them to shorten waits
// and to trust a self-signed test server.
type Option func(*Service)

// WithSchedule replaces DefaultSchedule: the waits after the first, second,
// ... failed attempt. A failure after the last wait marks the mail failed, so
// an empty schedule means one attempt only.
func WithSchedule(waits ...time.Duration) Option {
	return func(s *Service) { s.schedule = append([]time.Duration(nil), waits...) }
}

// WithSendTimeout replaces DefaultSendTimeout for one SMTP attempt.
func WithSendTimeout(d time.Duration) Option {
	return func(s *Service) { s.sendTimeout = d }
}

// WithTLSConfig sets the TLS client configuration for STARTTLS and smtps,
// e.g. one whose RootCAs trust a test server's self-signed certificate. The
// default verifies against the system roots. ServerName is filled in from
// the SMTP URL when empty.
func WithTLSConfig(c *tls.Config) Option {
	return func(s *Service) { s.tlsConfig = c }
}

// Service queues mail in the outbox and delivers it. Send may be called from
// any goroutine; Run is the one worker.
type Service struct {
	cfg         Config      // validated, From filled in
	smtp        *smtpTarget // nil: mail is written to the log
	outbox      Outbox
	log         *slog.Logger
	now         func() time.Time
	schedule    []time.Duration
	sendTimeout time.Duration
	tlsConfig   *tls.Config // nil: system roots
	idDomain    string      // right side of Message-IDs: the From domain

	// wake carries "the outbox changed" from Send to Run.
	wake *wakeup.Signal
	// running refuses a second concurrent Run: two workers would deliver the
	// same pending mail twice.
	running atomic.Bool
}

// New checks cfg and returns a service working from outbox. A nil logger
// discards; a nil now is time.Now.
func New(cfg Config, outbox Outbox, logger *slog.Logger, now func() time.Time, opts ...Option) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mail: %w", err)
	}
	if outbox == nil {
		return nil, errors.New("mail: New needs an outbox")
	}
	target, _ := parseSMTPURL(cfg.SMTPURL) // Validate accepted it
	cfg.From = cfg.from()
	from, _ := netmail.ParseAddress(cfg.From) // Validate accepted it
	_, domain, _ := strings.Cut(from.Address, "@")
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	s := &Service{
		cfg:         cfg,
		smtp:        target,
		outbox:      outbox,
		log:         logger,
		now:         now,
		schedule:    DefaultSchedule(),
		sendTimeout: DefaultSendTimeout,
		idDomain:    domain,
		wake:        wakeup.NewSignal(),
	}
	for _, o := range opts {
		o(s)
	}
	for i, d := range s.schedule {
		if d <= 0 {
			return nil, fmt.Errorf("mail: schedule wait %d is %s: want a positive duration", i+1, d)
		}
	}
	if s.sendTimeout <= 0 {
		return nil, fmt.Errorf("mail: send timeout %s: want a positive duration", s.sendTimeout)
	}
	if s.tlsConfig != nil && target != nil {
		// Clone: the caller's config stays theirs, and go-mail checks the
		// certificate against ServerName.
		s.tlsConfig = s.tlsConfig.Clone()
		if s.tlsConfig.ServerName == "" {
			s.tlsConfig.ServerName = target.host
		}
	}
	return s, nil
}

// Config returns the configuration in use, From filled in.
func (s *Service) Config() Config { return s.cfg }

// Send queues m. When it returns nil the mail is in the outbox on disk and
// will be delivered (or logged) by Run, now or after a restart. A company's
// mail (m.CompanyID) that would take its pending mails over the bound is not
// queued: the error wraps store.ErrMailOutboxFull.
func (s *Service) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mail: send to %q: %w", m.To, err)
	}
	if err := check(m); err != nil {
		return fmt.Errorf("mail: send to %q: %w", m.To, err)
	}
	now := s.now()
	rec := &store.Mail{
		To:            strings.TrimSpace(m.To),
		Subject:       m.Subject,
		Text:          m.Text,
		HTML:          m.HTML,
		State:         store.MailPending,
		CreatedAt:     now,
		NextAttemptAt: now,
		CompanyID:     m.CompanyID,
	}
	var err error
	if m.CompanyID != 0 {
		err = s.outbox.AppendCompanyMail(rec, s.cfg.companyLimits())
	} else {
		err = s.outbox.AppendMail(rec)
	}
	if err != nil {
		return fmt.Errorf("mail: queue mail to %q: %w", rec.To, err)
	}
	s.wake.Kick()
	return nil
}

// check refuses messages that would fail at every attempt, so the caller
// hears about it now instead of the outbox retrying for ten hours.
func check(m Message) error {
	if _, err := netmail.ParseAddress(m.To); err != nil {
		return fmt.Errorf("%w: recipient: %v", ErrInvalidMessage, err)
	}
	if strings.TrimSpace(m.Subject) == "" {
		return fmt.Errorf("%w: empty subject", ErrInvalidMessage)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return fmt.Errorf("%w: subject has a line break", ErrInvalidMessage)
	}
	if strings.TrimSpace(m.Text) == "" {
		// The text part is the fallback of every client and, without SMTP,
		// what the log shows.
		return fmt.Errorf("%w: empty text body", ErrInvalidMessage)
	}
	return nil
}
