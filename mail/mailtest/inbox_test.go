package mailtest

import (
	"fmt"
	"net/smtp"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const waitTimeout = 10 * time.Second

// A multipart/alternative message as mail clients write it: a quoted-printable
// text part with a soft line break inside the link, a base64 HTML part.
const alternative = "From: =?utf-8?q?Caf=C3=A9?= <cafe@example.com>\r\n" +
	"To: ana@example.com\r\n" +
	"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"b1\"\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Hi =C3=A0 you,\r\n" +
	"https://x.example/verify-email?token=3D=\r\n" +
	"abc%2Bdef\r\n" +
	"--b1\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+PGEgaHJlZj0iaHR0cHM6Ly94LmV4YW1wbGUvdmVyaWZ5LWVtYWlsP3Rva2VuPWFiYyUyQmRl\r\n" +
	"ZiZhbXA7eD0xIj5HbzwvYT48L3A+\r\n" +
	"--b1--\r\n"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                            string
		raw                             string
		wantFrom, wantSubject, wantText string
		wantHTML                        string
	}{
		{
			name:        "alternative, quoted-printable and base64",
			raw:         alternative,
			wantFrom:    "Café <cafe@example.com>",
			wantSubject: "Grüße",
			wantText:    "Hi à you,\nhttps://x.example/verify-email?token=abc%2Bdef",
			wantHTML:    `<p><a href="https://x.example/verify-email?token=abc%2Bdef&amp;x=1">Go</a></p>`,
		},
		{
			name: "nested in mixed",
			raw: "From: a@example.com\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=out\r\n\r\n" +
				"--out\r\nContent-Type: multipart/alternative; boundary=in\r\n\r\n" +
				"--in\r\nContent-Type: text/plain\r\n\r\nplain\r\n--in\r\nContent-Type: text/html\r\n\r\n<b>html</b>\r\n--in--\r\n" +
				"--out\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--out--\r\n",
			wantFrom: "a@example.com", wantSubject: "s", wantText: "plain", wantHTML: "<b>html</b>",
		},
		{
			name:     "single part without Content-Type",
			raw:      "From: a@example.com\r\nSubject: s\r\n\r\nline one\r\nline two\r\n",
			wantFrom: "a@example.com", wantSubject: "s", wantText: "line one\nline two\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := parse([]byte(tt.raw))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			for _, c := range []struct{ what, got, want string }{
				{"From", m.From, tt.wantFrom},
				{"Subject", m.Subject, tt.wantSubject},
				{"Text", m.Text, tt.wantText},
				{"HTML", m.HTML, tt.wantHTML},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
				}
			}
		})
	}
	if _, err := parse([]byte("Subject: s\r\nContent-Type: multipart/alternative\r\n\r\nx")); err == nil {
		t.Errorf("multipart without a boundary: got no error, want one")
	}
}

func TestLinkToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body, path, want string
	}{
		{"Open https://x.example/verify-email?token=abc now", "/verify-email", "abc"},
		{"https://x.example/verify-email?token=a%2Bb%26c&next=1", "/verify-email", "a+b&c"},
		{`<a href="https://x.example/reset-password?x=1&amp;token=t%2F1">`, "/reset-password", "t/1"},
		{`<a href="https://x.example/reset-password?token=a&#43;b">`, "/reset-password", "a b"},
		{"first https://x/verify-email?token=one then https://x/verify-email?token=two", "/verify-email", "one"},
		{"https://x/verify-email?token=abc", "/reset-password", ""},
		{"see /verify-email? for help; https://x/verify-email?token=abc", "/verify-email", "abc"},
		{"https://x/verify-email?token=abc#frag", "/verify-email", "abc"},
		{"no link here", "/verify-email", ""},
	}
	for _, tt := range tests {
		if got := LinkToken(tt.body, tt.path); got != tt.want {
			t.Errorf("LinkToken(%q, %q): got %q, want %q", tt.body, tt.path, got, tt.want)
		}
	}
}

// send delivers raw with the standard library's client, an implementation
// independent of the one the mail package uses.
func send(in *Inbox, to, raw string) error {
	u, err := url.Parse(in.URL())
	if err != nil {
		return err
	}
	return smtp.SendMail(u.Host, nil, "sender@example.com", []string{to}, []byte(raw))
}

func TestInboxReceivesAndWaits(t *testing.T) {
	t.Parallel()
	in := NewInbox(t)
	if !strings.HasPrefix(in.URL(), "smtp://127.0.0.1:") {
		t.Errorf("URL: got %q, want smtp://127.0.0.1:PORT", in.URL())
	}
	errc := make(chan error, 1)
	go func() { errc <- send(in, "Ana@Example.com", alternative) }()
	m := in.WaitFor(t, "ana@example.com", waitTimeout)
	if err := <-errc; err != nil {
		t.Fatalf("send: %v", err)
	}
	if got, want := strings.Join(m.To, ","), "Ana@Example.com"; got != want {
		t.Errorf("To: got %q, want %q", got, want)
	}
	if m.MailFrom != "sender@example.com" {
		t.Errorf("MailFrom: got %q, want %q", m.MailFrom, "sender@example.com")
	}
	if got := LinkToken(m.Text, "/verify-email"); got != "abc+def" {
		t.Errorf("token: got %q, want %q", got, "abc+def")
	}
	if n := len(in.Messages()); n != 1 {
		t.Errorf("Messages: got %d, want 1", n)
	}
}

func TestInboxFailNext(t *testing.T) {
	t.Parallel()
	in := NewInbox(t)
	in.FailNext(2)
	for i := range 2 {
		err := send(in, "bo@example.com", alternative)
		if err == nil || !strings.Contains(err.Error(), "451") {
			t.Errorf("delivery %d: got %v, want a 451 error", i+1, err)
		}
	}
	if err := send(in, "bo@example.com", alternative); err != nil {
		t.Errorf("delivery 3: got %v, want it accepted", err)
	}
	if n := len(in.Messages()); n != 1 {
		t.Errorf("Messages: got %d, want 1", n)
	}
}

func TestInboxRefusesUnparsableMail(t *testing.T) {
	t.Parallel()
	in := NewInbox(t)
	raw := "Subject: s\r\nContent-Type: multipart/alternative\r\n\r\nbody\r\n"
	if err := send(in, "cy@example.com", raw); err == nil || !strings.Contains(err.Error(), "554") {
		t.Errorf("got %v, want a 554 error", err)
	}
	if got := in.summary(); !strings.Contains(got, "boundary") {
		t.Errorf("summary: got %q, want it to say why the mail was refused", got)
	}
}

func TestInboxTLSAndAuth(t *testing.T) {
	t.Parallel()
	in := NewInbox(t, WithSTARTTLS(), WithAuth("user", "pass word"))
	u, err := url.Parse(in.URL())
	if err != nil {
		t.Fatal(err)
	}
	if pass, _ := u.User.Password(); u.User.Username() != "user" || pass != "pass word" {
		t.Errorf("URL: got %q, want the credentials in it", in.URL())
	}
	deliver := func(pass string) error {
		c, err := smtp.Dial(u.Host)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.StartTLS(in.ClientTLSConfig()); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
		if err := c.Auth(smtp.PlainAuth("", "user", pass, "127.0.0.1")); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
		if err := c.Mail("sender@example.com"); err != nil {
			return err
		}
		if err := c.Rcpt("dee@example.com"); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte(alternative)); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return c.Quit()
	}
	if err := deliver("wrong"); err == nil || !strings.Contains(err.Error(), "535") {
		t.Errorf("wrong password: got %v, want a 535 error", err)
	}
	if err := deliver("pass word"); err != nil {
		t.Errorf("right password: got %v, want the mail accepted", err)
	}
	in.WaitFor(t, "dee@example.com", waitTimeout)
}

// fakeTB records a failure instead of stopping the test.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = fmt.Sprintf(format, args...)
}

func TestWaitForTimesOut(t *testing.T) {
	t.Parallel()
	in := NewInbox(t)
	if err := send(in, "other@example.com", alternative); err != nil {
		t.Fatal(err)
	}
	fake := &fakeTB{TB: t}
	in.WaitFor(fake, "nobody@example.com", time.Millisecond)
	if !strings.Contains(fake.failed, "no mail to nobody@example.com") || !strings.Contains(fake.failed, "other@example.com") {
		t.Errorf("failure message: got %q, want it to name the missing and the received recipients", fake.failed)
	}
}
