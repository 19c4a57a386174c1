package mail

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
)

// The password is distinctive so that a leak into a log or a stored error
// cannot hide.
const (
	smtpUser = "relay-user"
	smtpPass = "Pa55-w0rd-never-logged"
)

func TestSMTPOverTLS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		inbox []mailtest.Option
	}{
		{"STARTTLS", []mailtest.Option{mailtest.WithSTARTTLS()}},
		{"STARTTLS with AUTH", []mailtest.Option{mailtest.WithSTARTTLS(), mailtest.WithAuth(smtpUser, smtpPass)}},
		{"smtps with AUTH", []mailtest.Option{mailtest.WithImplicitTLS(), mailtest.WithAuth(smtpUser, smtpPass)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inbox := mailtest.NewInbox(t, tt.inbox...)
			st := openStore(t, t.TempDir())
			log, logs := newLogger()
			s := newService(t, Config{SMTPURL: inbox.URL()}, st, log, WithTLSConfig(inbox.ClientTLSConfig()))
			startWorker(t, s)

			m := ResetPassword(publicURL, "Fay", "tok-tls", time.Hour)
			m.To = "fay@example.com"
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := inbox.WaitFor(t, "fay@example.com", waitTimeout)
			if tok := mailtest.LinkToken(got.HTML, "/reset-password"); tok != "tok-tls" {
				t.Errorf("token: got %q, want %q", tok, "tok-tls")
			}
			waitForMail(t, st, "fay@example.com", "marked sent", isState(store.MailSent))
			if strings.Contains(logs.String(), smtpPass) {
				t.Errorf("log shows the SMTP password: %q", logs.String())
			}
		})
	}
}

// Failures that must not be papered over: an untrusted certificate, and a
// server that would take the password without TLS.
func TestSMTPRefusesUnsafeServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		inbox     []mailtest.Option
		wantError string
	}{
		{"self-signed certificate, system roots", []mailtest.Option{mailtest.WithSTARTTLS()}, "certificate"},
		{"smtps, system roots", []mailtest.Option{mailtest.WithImplicitTLS()}, "certificate"},
		{"no AUTH offered", nil, "AUTH"},
		{"AUTH PLAIN offered without TLS", []mailtest.Option{mailtest.WithAuth(smtpUser, smtpPass), mailtest.WithInsecureAuth()}, "offers no STARTTLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inbox := mailtest.NewInbox(t, tt.inbox...)
			u, err := url.Parse(inbox.URL())
			if err != nil {
				t.Fatal(err)
			}
			u.User = url.UserPassword(smtpUser, smtpPass)
			if tt.name == "no AUTH offered" {
				// Past the TLS requirement, to the missing AUTH.
				u.RawQuery = "tls=insecure"
			}
			st := openStore(t, t.TempDir())
			log, logs := newLogger()
			s := newService(t, Config{SMTPURL: u.String()}, st, log)
			startWorker(t, s)

			m := ResetPassword(publicURL, "Gus", "tok", time.Hour)
			m.To = "gus@example.com"
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			rec := waitForMail(t, st, "gus@example.com", "with a failed attempt", func(m store.Mail) bool { return m.Attempts > 0 })
			if rec.State != store.MailPending || !strings.Contains(rec.LastError, tt.wantError) {
				t.Errorf("record: got state %s, error %q; want pending, an error about %q", rec.State, rec.LastError, tt.wantError)
			}
			if n := len(inbox.Messages()); n != 0 {
				t.Errorf("inbox: got %d messages, want none", n)
			}
			if strings.Contains(logs.String(), smtpPass) || strings.Contains(rec.LastError, smtpPass) {
				t.Errorf("the SMTP password leaked: log %q, error %q", logs.String(), rec.LastError)
			}
		})
	}
}

// A server that offers no STARTTLS (as when an attacker on the path strips it
// from the server's answer) gets nothing when TLS is required: not the mail,
// whose links are live tokens, and not the credentials. The log says why and
// what setting would allow it. Required is the default for a URL with
// credentials, on loopback too.
func TestSMTPTLSRequired(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		inbox []mailtest.Option
		url   func(inboxURL string) string
	}{
		{"tls=required, no credentials", nil, func(s string) string { return s + "?tls=required" }},
		{"credentials, tls by default", []mailtest.Option{mailtest.WithAuth(smtpUser, smtpPass), mailtest.WithInsecureAuth()},
			func(s string) string { return s }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inbox := mailtest.NewInbox(t, tt.inbox...)
			st := openStore(t, t.TempDir())
			log, logs := newLogger()
			s := newService(t, Config{SMTPURL: tt.url(inbox.URL())}, st, log)
			startWorker(t, s)

			m := ResetPassword(publicURL, "Hal", "tok-stripped", time.Hour)
			m.To = "hal@example.com"
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			rec := waitForMail(t, st, "hal@example.com", "with a failed attempt", func(m store.Mail) bool { return m.Attempts > 0 })
			const why = "the server offers no STARTTLS and --smtp-url requires TLS"
			if rec.State != store.MailPending || !strings.Contains(rec.LastError, why) {
				t.Errorf("record: got state %s, error %q; want pending, an error saying %q", rec.State, rec.LastError, why)
			}
			if n := len(inbox.Messages()); n != 0 {
				t.Errorf("inbox: got %d messages, want none", n)
			}
			deadline := time.Now().Add(waitTimeout)
			for !strings.Contains(logs.String(), why) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if l := logs.String(); !strings.Contains(l, "e-mail attempt failed") || !strings.Contains(l, why) || !strings.Contains(l, "tls=") {
				t.Errorf("log: want the failed attempt, %q and the setting that allows it; got %q", why, l)
			}
			if strings.Contains(logs.String(), smtpPass) {
				t.Errorf("log shows the SMTP password: %q", logs.String())
			}
		})
	}
}

// Without TLS, what the operator allowed goes: a relay on loopback that takes
// no credentials gets the mail by default (tls=opportunistic), and
// tls=insecure sends the credentials too.
func TestSMTPWithoutTLSWhenAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		inbox []mailtest.Option
		url   func(inboxURL string) string
	}{
		{"loopback, no credentials, by default", nil, func(s string) string { return s }},
		{"credentials, tls=insecure", []mailtest.Option{mailtest.WithAuth(smtpUser, smtpPass), mailtest.WithInsecureAuth()},
			func(s string) string { return s + "?tls=insecure" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inbox := mailtest.NewInbox(t, tt.inbox...)
			st := openStore(t, t.TempDir())
			log, _ := newLogger()
			s := newService(t, Config{SMTPURL: tt.url(inbox.URL())}, st, log)
			startWorker(t, s)

			m := ResetPassword(publicURL, "Ida", "tok-clear", time.Hour)
			m.To = "ida@example.com"
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := inbox.WaitFor(t, "ida@example.com", waitTimeout)
			if tok := mailtest.LinkToken(got.HTML, "/reset-password"); tok != "tok-clear" {
				t.Errorf("token: got %q, want %q", tok, "tok-clear")
			}
			waitForMail(t, st, "ida@example.com", "marked sent", isState(store.MailSent))
		})
	}
}
