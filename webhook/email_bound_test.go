package webhook

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store"
)

// TestEmailEntriesBoundedWhileRelayDown: while the SMTP relay is down, a
// company's e-mail entries queue at most the company's bound of pending
// mails; a delivery over it is not counted delivered but fails, says why
// and is retried, and the server's own account mail is still queued. The
// mails that went in count against the company's storage budget.
func TestEmailEntriesBoundedWhileRelayDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Nothing listens on the relay's address: every SMTP attempt fails, and
	// the next one is an hour away.
	mailer, err := mail.New(mail.Config{SMTPURL: "smtp://" + freeport.Addr(t), MaxCompanyPending: 2}, f.st, log, time.Now,
		mail.WithSchedule(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Schedule: []time.Duration{time.Hour}}, f.st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc.SetMailer(mailer)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mailer.Run(ctx) })
	wg.Go(func() { _ = svc.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	// Three entries to the same address: each event is three mails.
	f.configure(svc, EntryInput{URL: "mailto:ana@example.com"}, EntryInput{URL: "mailto:ana@example.com"}, EntryInput{URL: "mailto:ana@example.com"})
	f.inbound(svc, f.device, "SIM1", time.Now())
	eventually(t, "the three attempts are logged", func() bool { return len(f.lines()) == 3 })

	var queued, full int
	for _, l := range f.lines() {
		switch {
		case l.StatusCode == http.StatusAccepted:
			queued++
		case l.StatusCode == 0 && l.State == store.WebhookPending && strings.Contains(l.Error, "not queued: the company's mail outbox is full (2 mails pending"):
			full++
		default:
			t.Errorf("line %+v: want 202, or a retry because the mail outbox is full", l)
		}
	}
	if queued != 2 || full != 1 {
		t.Errorf("%d deliveries queued as mail, %d refused; want 2 and 1", queued, full)
	}
	n, size, err := f.st.MailOutboxSize(f.company)
	if err != nil || n != 2 {
		t.Fatalf("the company's mail outbox: %d mails (%v), want 2", n, err)
	}
	mails, err := f.st.Mails(true)
	if err != nil || len(mails) != 2 {
		t.Fatalf("pending mails: %d (%v), want the company's 2", len(mails), err)
	}
	used, err := f.st.StorageUsed(f.company, time.Now())
	if err != nil || used < size+2*store.MailRowCost {
		t.Errorf("the company's storage used: %d (%v), want at least its mails' %d", used, err, size+2*store.MailRowCost)
	}

	// The server's own mail is no company's: queued whatever the company's
	// webhook mails hold.
	if err := mailer.Send(context.Background(), mail.Message{To: "ana@example.com", Subject: "Reset your password", Text: "link"}); err != nil {
		t.Fatalf("an account mail while the company's mail outbox is full: %v", err)
	}
	// And the company's mail over the bound is refused with an error the
	// caller can tell apart.
	err = mailer.Send(context.Background(), mail.Message{To: "ana@example.com", Subject: "SMS", Text: "x", CompanyID: f.company})
	if !errors.Is(err, store.ErrMailOutboxFull) {
		t.Errorf("a company mail over the bound: %v, want store.ErrMailOutboxFull", err)
	}
	if mails, _ := f.st.Mails(true); len(mails) != 3 {
		t.Errorf("pending mails: %d, want the company's 2 and the account mail", len(mails))
	}
}
