package mail

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/simrelay/simrelay/store"
)

// storeRetryDelay is the wait after the outbox itself failed (disk full,
// store closing): long enough not to spin, short enough that mail resumes
// soon after the store recovers.
const storeRetryDelay = 30 * time.Second

// Run is the delivery worker; start exactly one per Service. It first
// delivers whatever is due (mail left pending by an earlier process
// included), then sleeps until Send wakes it or the next retry is due.
// It returns nil when ctx ends, leaving undelivered mail pending for the
// next start.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("mail: Run is already running for this service")
	}
	defer s.running.Store(false)

	mode := "log"
	if s.smtp != nil {
		mode = "smtp"
	}
	s.log.Debug("mail worker started", "mode", mode, "smtp", s.cfg.Redacted())
	for {
		next, err := s.deliverDue(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if s.cfg.Poll > 0 {
			if poll := s.now().Add(s.cfg.Poll); next.IsZero() || poll.Before(next) {
				next = poll
			}
		}
		if err != nil {
			// A record that could not be updated is still due: waiting at
			// least storeRetryDelay keeps a broken store from becoming a hot
			// loop. A Send still wakes the worker at once.
			s.log.Error("mail outbox", "err", err)
			if retry := s.now().Add(storeRetryDelay); next.Before(retry) {
				next = retry
			}
		}
		s.wake.Wait(ctx, next, s.now)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// deliverDue makes one attempt at every pending mail whose time has come and
// returns when the earliest of the rest is due (zero when none is pending).
func (s *Service) deliverDue(ctx context.Context) (time.Time, error) {
	pending, err := s.outbox.Mails(true)
	if err != nil {
		return time.Time{}, err
	}
	// The server's own account mails first, oldest first, then the
	// companies' webhook mails: a sign-up's or a reset's mail does not wait
	// for a pass over every company's e-mail entries.
	slices.SortStableFunc(pending, func(a, b store.Mail) int {
		return cmp.Compare(min(a.CompanyID, 1), min(b.CompanyID, 1))
	})
	var next time.Time
	var errs []error
	for _, m := range pending {
		if ctx.Err() != nil {
			break
		}
		at := m.NextAttemptAt
		if !at.After(s.now()) {
			claimed, ok, err := s.outbox.ClaimMail(m.ID)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("mail: claim %d: %w", m.ID, err))
			case !ok:
				// Sent meanwhile, or another node's: that node records it,
				// or its lease runs out and a later look (cfg.Poll) takes it.
				continue
			case claimed.NextAttemptAt.After(s.now()):
				// Another node made the attempt since the list was read,
				// and it failed: the next one waits for its time. Recording
				// nothing new gives the claim back.
				at = claimed.NextAttemptAt
				if _, err := s.outbox.UpdateMail(m.ID, func(*store.Mail) {}); err != nil {
					errs = append(errs, fmt.Errorf("mail: give back the claim of %d: %w", m.ID, err))
				}
			default:
				if at, err = s.deliver(ctx, claimed); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next, errors.Join(errs...)
}

// deliver makes one attempt at m and records the outcome. It returns the
// time of the next attempt, zero when the mail is done with.
func (s *Service) deliver(ctx context.Context, m store.Mail) (time.Time, error) {
	if s.smtp == nil {
		// Without SMTP the log is the delivery channel: the body goes in,
		// links and all, because that is how the admin reads them.
		s.log.Info("e-mail (no --smtp-url set, so it is written here)",
			"mail_id", m.ID, "to", m.To, "subject", m.Subject, "text", m.Text)
		_, err := s.record(ctx, m.ID, func(r *store.Mail) {
			r.State = store.MailLogged
			r.NextAttemptAt = time.Time{}
		})
		if err != nil {
			return m.NextAttemptAt, fmt.Errorf("mail: record logged %d: %w", m.ID, err)
		}
		return time.Time{}, nil
	}

	sendErr := s.sendSMTP(ctx, m)
	if sendErr != nil && ctx.Err() != nil {
		// Shutting down: an interrupted attempt is not the relay's fault and
		// does not count. The mail stays due for the next start.
		return m.NextAttemptAt, nil
	}
	now := s.now()
	var next time.Time
	rec, err := s.record(ctx, m.ID, func(r *store.Mail) {
		r.Attempts++
		if sendErr == nil {
			// The links in the body are live tokens; once the relay has the
			// mail the outbox needs only the metadata.
			r.State, r.SentAt, r.NextAttemptAt = store.MailSent, now, time.Time{}
			r.Text, r.HTML = "", ""
			return
		}
		r.LastError = s.scrub(sendErr.Error())
		if r.Attempts > len(s.schedule) {
			r.State, r.NextAttemptAt = store.MailFailed, time.Time{}
			return
		}
		next = now.Add(s.schedule[r.Attempts-1])
		r.NextAttemptAt = next
	})
	if err != nil {
		if sendErr == nil {
			return m.NextAttemptAt, fmt.Errorf("mail: record sent %d (it will be sent again): %w", m.ID, err)
		}
		return m.NextAttemptAt, fmt.Errorf("mail: record failure of %d: %w", m.ID, err)
	}
	switch rec.State {
	case store.MailSent:
		s.log.Info("e-mail sent", "mail_id", m.ID, "to", m.To, "subject", m.Subject, "attempts", rec.Attempts)
	case store.MailFailed:
		s.log.Error("e-mail failed, giving up", "mail_id", m.ID, "to", m.To, "subject", m.Subject,
			"attempts", rec.Attempts, "err", rec.LastError)
	default:
		s.log.Warn("e-mail attempt failed, will retry", "mail_id", m.ID, "to", m.To,
			"attempts", rec.Attempts, "next_attempt_at", next, "err", rec.LastError)
	}
	return next, nil
}

// recordRetryEvery is how often an attempt's outcome that the database did
// not take, because it did not answer, is written again (record).
const recordRetryEvery = 500 * time.Millisecond

// record writes an attempt's outcome into the mail's record. An outcome the
// database did not take because it did not answer (PostgreSQL away for a
// moment: a restart, a failover) is written again every recordRetryEvery
// for up to half the send timeout, unless the worker stops. The mail went
// out: left unrecorded under its claim's lease, it would go out again once
// the lease ran out, by this node or another, without any crash. The lease
// (postgres.Options.Lease, 60 s) outlasts the attempt and the retries.
func (s *Service) record(ctx context.Context, id uint64, fn func(*store.Mail)) (store.Mail, error) {
	rec, err := s.outbox.UpdateMail(id, fn)
	for until := time.Now().Add(s.sendTimeout / 2); errors.Is(err, store.ErrUnavailable) && time.Now().Before(until); {
		select {
		case <-ctx.Done():
			return rec, err
		case <-time.After(recordRetryEvery):
		}
		rec, err = s.outbox.UpdateMail(id, fn)
	}
	return rec, err
}

// sendSMTP makes one SMTP delivery of m under the send timeout.
func (s *Service) sendSMTP(ctx context.Context, m store.Mail) error {
	msg := gomail.NewMsg()
	if err := msg.From(s.cfg.From); err != nil {
		return fmt.Errorf("mail: send %d: from: %w", m.ID, err)
	}
	if err := msg.To(m.To); err != nil {
		return fmt.Errorf("mail: send %d: to: %w", m.ID, err)
	}
	msg.Subject(m.Subject)
	// Date and Message-ID come from the record, so every attempt is the same
	// message and a receiver can fold the duplicate of an at-least-once resend.
	msg.SetDateWithValue(m.CreatedAt)
	msg.SetMessageIDWithValue(s.messageID(m))
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}

	t := s.smtp
	opts := []gomail.Option{
		gomail.WithPort(t.port),
		gomail.WithTimeout(s.sendTimeout),
	}
	if s.tlsConfig != nil {
		opts = append(opts, gomail.WithTLSConfig(s.tlsConfig))
	}
	switch {
	case t.implicitTLS:
		opts = append(opts, gomail.WithSSL())
	case t.tls == TLSRequired:
		// STARTTLS or nothing: an attacker on the path who strips it from
		// the server's answer gets no mail (its links are live tokens)
		// and no credentials.
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if t.user != "" {
		if t.tls == TLSInsecure {
			// The operator's explicit choice: credentials go whether or
			// not the connection has TLS, with the strongest mechanism
			// the server offers (SCRAM's channel-binding forms need TLS).
			opts = append(opts, gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthSCRAMSHA256,
				gomail.SMTPAuthSCRAMSHA1, gomail.SMTPAuthCramMD5, gomail.SMTPAuthPlainNoEnc, gomail.SMTPAuthLoginNoEnc))
		} else {
			// Over TLS (required with a user name unless tls=insecure),
			// auto-discovery picks the strongest mechanism the server
			// offers.
			opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover))
		}
		opts = append(opts, gomail.WithUsername(t.user), gomail.WithPassword(t.pass))
	}
	client, err := gomail.NewClient(t.host, opts...)
	if err != nil {
		return fmt.Errorf("mail: send %d: %w", m.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.sendTimeout)
	defer cancel()
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		if !t.implicitTLS && t.tls == TLSRequired && strings.Contains(err.Error(), "does not support STARTTLS") {
			allow := "?tls=opportunistic to send mail without TLS"
			if t.user != "" {
				allow = "?tls=insecure to send mail and credentials without TLS"
			}
			return fmt.Errorf("mail: send %d via %s: the server offers no STARTTLS and --smtp-url requires TLS, so nothing was sent "+
				"(an attacker on the path may have removed it from the server's answer; for a relay without TLS on a network you trust, "+
				"add %s): %w", m.ID, addr(t), allow, err)
		}
		return fmt.Errorf("mail: send %d via %s: %w", m.ID, addr(t), err)
	}
	return nil
}

func addr(t *smtpTarget) string {
	return t.host + ":" + strconv.Itoa(t.port)
}

// messageID is stable per outbox record: <simrelay.ID.CREATED@from-domain>.
func (s *Service) messageID(m store.Mail) string {
	return fmt.Sprintf("simrelay.%d.%d@%s", m.ID, m.CreatedAt.UnixNano(), s.idDomain)
}

// scrub keeps the SMTP password out of an error text that is stored and
// logged, whatever a server or library chose to echo.
func (s *Service) scrub(msg string) string {
	if s.smtp != nil && s.smtp.pass != "" {
		msg = strings.ReplaceAll(msg, s.smtp.pass, redactedPassword)
	}
	return msg
}
