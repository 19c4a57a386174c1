package mail

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

// TestCompanyMailBound: a company's mails (Message.CompanyID) are queued up
// to Config.MaxCompanyPending, then refused with store.ErrMailOutboxFull;
// another company's and the server's own mails are not held by it, and a
// negative bound is none.
func TestCompanyMailBound(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	acme, other := storedCompany(t, st), storedCompany(t, st)
	s := newService(t, Config{MaxCompanyPending: 2}, st, nil)
	send := func(companyID uint64, to string) error {
		return s.Send(context.Background(), Message{To: to, Subject: "SMS from +15550100001", Text: "Hi.", CompanyID: companyID})
	}
	for i := range 2 {
		if err := send(acme, fmt.Sprintf("ops%d@example.com", i)); err != nil {
			t.Fatalf("company mail %d: %v", i, err)
		}
	}
	if err := send(acme, "ops@example.com"); !errors.Is(err, store.ErrMailOutboxFull) {
		t.Fatalf("a third company mail: %v, want store.ErrMailOutboxFull", err)
	}
	if err := send(other, "ops@example.com"); err != nil {
		t.Fatalf("another company's mail: %v", err)
	}
	if err := send(0, "ana@example.com"); err != nil {
		t.Fatalf("an account mail: %v", err)
	}
	if n, _, err := st.MailOutboxSize(acme); err != nil || n != 2 {
		t.Fatalf("company %d's mails: %d (%v), want 2", acme, n, err)
	}

	unbounded := newService(t, Config{MaxCompanyPending: -1, MaxCompanyPendingBytes: -1}, st, nil)
	if err := unbounded.Send(context.Background(), Message{To: "ops@example.com", Subject: "s", Text: "t", CompanyID: acme}); err != nil {
		t.Fatalf("no bound: %v", err)
	}
	if lim := (Config{}).companyLimits(); lim.MaxPending != DefaultMaxCompanyPending || lim.MaxBytes != DefaultMaxCompanyPendingBytes {
		t.Errorf("default bound: %+v", lim)
	}
}

// TestAccountMailsFirst: the worker sends the server's own mails before the
// companies' webhook mails that were due before them, so a reset link does
// not wait behind a company's backlog.
func TestAccountMailsFirst(t *testing.T) {
	t.Parallel()
	inbox := mailtest.NewInbox(t)
	st := openStore(t, t.TempDir())
	acme := storedCompany(t, st)
	now := time.Now()
	for i := range 3 {
		m := store.Mail{CompanyID: acme, To: fmt.Sprintf("ops%d@example.com", i), Subject: "SMS", Text: "Hi.", State: store.MailPending, CreatedAt: now, NextAttemptAt: now}
		if err := st.AppendCompanyMail(&m, store.MailLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	reset := store.Mail{To: "ana@example.com", Subject: "Reset your password", Text: "link", State: store.MailPending, CreatedAt: now, NextAttemptAt: now}
	if err := st.AppendMail(&reset); err != nil {
		t.Fatal(err)
	}
	startWorker(t, newService(t, Config{SMTPURL: inbox.URL()}, st, nil))
	inbox.WaitFor(t, "ops2@example.com", waitTimeout)
	got := inbox.Messages()
	if len(got) != 4 || got[0].Subject != "Reset your password" {
		var subjects []string
		for _, m := range got {
			subjects = append(subjects, m.Subject)
		}
		t.Fatalf("sent in the order %q, want the reset first", subjects)
	}
}

// companies numbers the companies storedCompany makes.
var companies atomic.Uint64

// storedCompany stores a company, whose mails the outbox then takes (a
// company that is not stored has none), and returns its id.
func storedCompany(t *testing.T, st *boltstore.Store) uint64 {
	t.Helper()
	n := companies.Add(1)
	c := store.Company{Name: fmt.Sprintf("Company %d", n), APIKeyHash: []byte(fmt.Sprintf("key %d", n))}
	if err := st.CreateCompany(&c, &store.User{Email: fmt.Sprintf("admin-%d@example.com", n), PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	return c.ID
}
