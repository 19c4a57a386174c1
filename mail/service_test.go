package mail

import (
	"context"
	"errors"
	netmail "net/mail"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

const publicURL = "https://sms.example.com"

func TestSMTPDelivery(t *testing.T) {
	t.Parallel()
	inbox := mailtest.NewInbox(t)
	st := openStore(t, t.TempDir())
	log, _ := newLogger()
	s := newService(t, Config{SMTPURL: inbox.URL(), From: "Acme SMS <sms@acme.example>", PublicURL: publicURL}, st, log)
	startWorker(t, s)

	m := VerifyEmail(publicURL, "Ana", "Acme", "tok-123", 24*time.Hour)
	m.To = "ana@example.com"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := inbox.WaitFor(t, "ana@example.com", waitTimeout)

	from, err := netmail.ParseAddress(got.From)
	if err != nil {
		t.Fatalf("From header %q: %v", got.From, err)
	}
	checks := []struct{ what, got, want string }{
		{"From address", from.Address, "sms@acme.example"},
		{"From name", from.Name, "Acme SMS"},
		{"envelope sender", got.MailFrom, "sms@acme.example"},
		{"envelope recipients", strings.Join(got.To, ","), "ana@example.com"},
		{"To header", got.Header.Get("To"), "<ana@example.com>"},
		{"Subject", got.Subject, m.Subject},
		{"token in the text part", mailtest.LinkToken(got.Text, "/verify-email"), "tok-123"},
		{"token in the HTML part", mailtest.LinkToken(got.HTML, "/verify-email"), "tok-123"},
		{"text part", got.Text, strings.ReplaceAll(m.Text, "\r\n", "\n")},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if !strings.HasPrefix(got.Header.Get("Content-Type"), "multipart/alternative") {
		t.Errorf("Content-Type: got %q, want multipart/alternative", got.Header.Get("Content-Type"))
	}
	if !strings.Contains(got.HTML, "<a href=") {
		t.Errorf("HTML part: got %q, want a link", got.HTML)
	}
	if id := got.Header.Get("Message-Id"); !strings.HasPrefix(id, "<simrelay.") || !strings.HasSuffix(id, "@acme.example>") {
		t.Errorf("Message-ID: got %q, want <simrelay.…@acme.example>", id)
	}

	rec := waitForMail(t, st, "ana@example.com", "marked sent", isState(store.MailSent))
	if rec.Text != "" || rec.HTML != "" {
		t.Errorf("sent record: got text %q and HTML of %d bytes, want both cleared (they hold a live token)", rec.Text, len(rec.HTML))
	}
	if rec.Subject != m.Subject || rec.SentAt.IsZero() || rec.Attempts != 1 {
		t.Errorf("sent record: got subject %q, sent at %v, %d attempts; want the subject kept, a send time, 1 attempt", rec.Subject, rec.SentAt, rec.Attempts)
	}
}

func TestSMTPRetryThenDeliver(t *testing.T) {
	t.Parallel()
	inbox := mailtest.NewInbox(t)
	inbox.FailNext(2)
	st := openStore(t, t.TempDir())
	log, _ := newLogger()
	s := newService(t, Config{SMTPURL: inbox.URL()}, st, log, WithSchedule(time.Millisecond, 10*time.Millisecond, time.Hour))
	startWorker(t, s)

	m := ResetPassword(publicURL, "Bo", "tok-retry", time.Hour)
	m.To = "bo@example.com"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := inbox.WaitFor(t, "bo@example.com", waitTimeout)
	if tok := mailtest.LinkToken(got.Text, "/reset-password"); tok != "tok-retry" {
		t.Errorf("token: got %q, want %q", tok, "tok-retry")
	}
	rec := waitForMail(t, st, "bo@example.com", "marked sent", isState(store.MailSent))
	if rec.Attempts != 3 {
		t.Errorf("attempts: got %d, want 3 (two refused, one accepted)", rec.Attempts)
	}
	if !strings.Contains(rec.LastError, "451") {
		t.Errorf("last error: got %q, want the server's 451", rec.LastError)
	}
	if n := len(inbox.Messages()); n != 1 {
		t.Errorf("inbox: got %d messages, want 1", n)
	}
}

func TestSMTPGivesUpAfterSchedule(t *testing.T) {
	t.Parallel()
	inbox := mailtest.NewInbox(t)
	inbox.FailNext(100)
	st := openStore(t, t.TempDir())
	log, logs := newLogger()
	s := newService(t, Config{SMTPURL: inbox.URL()}, st, log, WithSchedule(time.Millisecond, time.Millisecond))
	startWorker(t, s)

	m := ResetPassword(publicURL, "Cy", "tok", time.Hour)
	m.To = "cy@example.com"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	rec := waitForMail(t, st, "cy@example.com", "marked failed", isState(store.MailFailed))
	if rec.Attempts != 3 {
		t.Errorf("attempts: got %d, want 3 (the first and one per wait of the schedule)", rec.Attempts)
	}
	if !rec.NextAttemptAt.IsZero() {
		t.Errorf("next attempt: got %v, want none", rec.NextAttemptAt)
	}
	// The record turns failed before the worker logs it: wait for the line.
	poll.Until(t, "the give-up logged", func() bool { return strings.Contains(logs.String(), "giving up") })
}

func TestRestartDeliversPendingMail(t *testing.T) {
	t.Parallel()
	inbox := mailtest.NewInbox(t)
	dir := t.TempDir()
	log, _ := newLogger()

	// The first process queues a mail and stops before its worker runs.
	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := newService(t, Config{SMTPURL: inbox.URL()}, st, log)
	m := VerifyEmail(publicURL, "Di", "Acme", "tok-restart", 24*time.Hour)
	m.To = "di@example.com"
	if err := first.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The next process finds it on disk and delivers it.
	st = openStore(t, dir)
	waitForMail(t, st, "di@example.com", "pending after the restart", isState(store.MailPending))
	startWorker(t, newService(t, Config{SMTPURL: inbox.URL()}, st, log))
	got := inbox.WaitFor(t, "di@example.com", waitTimeout)
	if tok := mailtest.LinkToken(got.Text, "/verify-email"); tok != "tok-restart" {
		t.Errorf("token: got %q, want %q", tok, "tok-restart")
	}
	waitForMail(t, st, "di@example.com", "marked sent", isState(store.MailSent))
}

func TestLogModeWritesMailToLog(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	log, logs := newLogger()
	s := newService(t, Config{PublicURL: publicURL}, st, log)
	startWorker(t, s)

	m := Invite(publicURL, "Ed", "Acme", "Ana", "tok-log", 72*time.Hour)
	m.To = "ed@example.com"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send: %v", err)
	}
	rec := waitForMail(t, st, "ed@example.com", "marked logged", isState(store.MailLogged))
	if rec.Text != m.Text {
		t.Errorf("logged record: got text %q, want it kept for `simrelay admin mail`", rec.Text)
	}
	out := logs.String()
	for _, want := range []string{"level=INFO", "to=ed@example.com", "Ana invited you to Acme on simrelay", publicURL + "/reset-password?token=tok-log"} {
		if !strings.Contains(out, want) {
			t.Errorf("log: got %q, want it to contain %q", out, want)
		}
	}
}

func TestSendRefusesBadMessages(t *testing.T) {
	t.Parallel()
	good := Message{To: "ana@example.com", Subject: "Hello", Text: "Hi."}
	tests := []struct {
		name string
		edit func(*Message)
	}{
		{"no recipient", func(m *Message) { m.To = "" }},
		{"not an address", func(m *Message) { m.To = "ana at example.com" }},
		{"two addresses", func(m *Message) { m.To = "ana@example.com, bo@example.com" }},
		{"header injection in To", func(m *Message) { m.To = "ana@example.com\r\nBcc: x@example.com" }},
		{"empty subject", func(m *Message) { m.Subject = " " }},
		{"subject with a line break", func(m *Message) { m.Subject = "Hi\r\nBcc: x@example.com" }},
		{"empty text", func(m *Message) { m.Text = "" }},
	}
	st := openStore(t, t.TempDir())
	s := newService(t, Config{}, st, nil)
	for _, tt := range tests {
		m := good
		tt.edit(&m)
		if err := s.Send(context.Background(), m); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: got %v, want ErrInvalidMessage", tt.name, err)
		}
	}
	if all, _ := st.Mails(false); len(all) != 0 {
		t.Errorf("outbox: got %d mails, want none queued", len(all))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Send(ctx, good); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v, want context.Canceled", err)
	}
}

func TestSendWithoutWorkerDoesNotBlock(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	s := newService(t, Config{}, st, nil)
	for i := range 3 {
		m := Message{To: "ana@example.com", Subject: "Hello", Text: "Hi."}
		if err := s.Send(context.Background(), m); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	pending, err := st.Mails(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 3 {
		t.Errorf("pending: got %d, want 3", len(pending))
	}
}

type brokenOutbox struct{ Outbox }

func (brokenOutbox) AppendMail(*store.Mail) error { return errors.New("disk full") }

func TestSendReportsOutboxFailure(t *testing.T) {
	t.Parallel()
	s := newService(t, Config{}, brokenOutbox{}, nil)
	err := s.Send(context.Background(), Message{To: "ana@example.com", Subject: "Hello", Text: "Hi."})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("got %v, want the outbox's error", err)
	}
}

func TestRunRefusesSecondWorker(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	s := newService(t, Config{}, st, nil)
	startWorker(t, s)
	// A mail the worker logged proves the first Run holds the service.
	if err := s.Send(context.Background(), Message{To: "ana@example.com", Subject: "Hello", Text: "Hi."}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	waitForMail(t, st, "ana@example.com", "marked logged", isState(store.MailLogged))

	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(stopped); err == nil {
		t.Fatal("a second Run alongside the first: got nil, want an error")
	}
}

func TestNewRefusesBadSetup(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	tests := []struct {
		name   string
		cfg    Config
		outbox Outbox
		opts   []Option
		want   string
	}{
		{"bad url", Config{SMTPURL: "smtp://host"}, st, nil, "--smtp-url"},
		{"no outbox", Config{}, nil, nil, "outbox"},
		{"zero wait", Config{}, st, []Option{WithSchedule(time.Second, 0)}, "schedule wait 2"},
		{"zero timeout", Config{}, st, []Option{WithSendTimeout(0)}, "send timeout"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg, tt.outbox, nil, nil, tt.opts...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}
