package account_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// A company that invites and deletes in turn is never full, and each
// invitation is a mail of the server's own to an address the company
// names: it sends InvitesPerDay in a day, then is refused 429 rate_limited
// with Retry-After, nothing stored and no mail, while another company still
// invites; an invitation the store refused (an address already invited)
// does not count, and the next day the company invites again.
func TestInvitesPerDayBounded(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc := newService(t, st, account.Config{}, clk.Now)
	owner := account.OwnerInput{FirstName: "A", LastName: "B", Password: "Correct horse battery 9"}
	owner.Email = "owner@acme.test"
	acme, _, _, err := svc.CreateCompany("Acme", owner)
	if err != nil {
		t.Fatal(err)
	}
	owner.Email = "owner@beta.test"
	beta, _, _, err := svc.CreateCompany("Beta", owner)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := account.Principal{CompanyID: acme.ID, Role: store.RoleAdmin, ViaAPIKey: true}
	invite := func(p account.Principal, email string) (store.User, error) {
		return svc.Invite(ctx, p, account.InviteInput{FirstName: "Ivy", LastName: "Ng", Email: email, Role: store.RoleMember})
	}
	mails := func() int {
		t.Helper()
		m, err := st.Mails(true)
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	// Refused by the store: counts nothing.
	if _, err := invite(a, "owner@acme.test"); err == nil {
		t.Fatal("the owner's address was invited again")
	}
	for i := range account.InvitesPerDay {
		u, err := invite(a, fmt.Sprintf("ivy%d@example.test", i))
		if err != nil {
			t.Fatalf("invitation %d: %v", i+1, err)
		}
		if err := svc.DeleteUser(ctx, a, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	sent := mails()
	_, err = invite(a, "one-more@example.test")
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.RateLimited || pe.RetryAfter <= 0 {
		t.Fatalf("invitation %d of the day: %v, want rate_limited with Retry-After", account.InvitesPerDay+1, err)
	}
	if n := mails(); n != sent {
		t.Errorf("the refused invitation queued %d mails", n-sent)
	}
	if _, err := st.UserByEmail("one-more@example.test"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused invitation stored its user: %v", err)
	}
	if _, err := invite(account.Principal{CompanyID: beta.ID, Role: store.RoleAdmin, ViaAPIKey: true}, "ivy@beta.test"); err != nil {
		t.Fatalf("another company's invitation: %v", err)
	}
	clk.Advance(24 * time.Hour)
	if _, err := invite(a, "next-day@example.test"); err != nil {
		t.Fatalf("the next day's invitation: %v", err)
	}
}

// Two nodes of a cluster that share the invitations' windows let a company
// send InvitesPerDay between them, not that many each: the day's count is
// what the test asserts (every one of them allowed, the next refused on
// both nodes), so it sends them all.
func TestInvitesCountedOnceInCluster(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	log := slog.New(slog.DiscardHandler)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	cfg := account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}
	var nodes [2]*account.Service
	for i := range nodes {
		s, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		mailer, err := mail.New(mail.Config{PublicURL: "http://localhost"}, s, log, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if nodes[i], err = account.New(cfg, s, mailer, log, clk.Now); err != nil {
			t.Fatal(err)
		}
		w, err := s.Windows(account.InviteScope, account.InviteRate())
		if err != nil {
			t.Fatal(err)
		}
		nodes[i].ShareInvites(w)
	}
	c, _, _, err := nodes[0].CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "owner@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := account.Principal{CompanyID: c.ID, Role: store.RoleAdmin, ViaAPIKey: true}
	// The day's invitations, from both nodes, a few at once as a company's
	// admins and integrations would make them (one after another they took
	// most of the package's time): each is allowed, whichever node counts
	// it and whatever the other counts meanwhile.
	const senders = 8
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for w := range senders {
		wg.Go(func() {
			for i := w; i < account.InvitesPerDay; i += senders {
				n := nodes[i%2]
				u, err := n.Invite(ctx, p, account.InviteInput{FirstName: "Ivy", LastName: "Ng", Email: fmt.Sprintf("ivy%d@example.test", i), Role: store.RoleMember})
				if err != nil {
					errs <- fmt.Errorf("invitation %d: %w", i+1, err)
					return
				}
				if err := n.DeleteUser(ctx, p, u.ID); err != nil {
					errs <- fmt.Errorf("delete the invitee of invitation %d: %w", i+1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, n := range nodes {
		_, err := n.Invite(ctx, p, account.InviteInput{FirstName: "Ivy", LastName: "Ng", Email: fmt.Sprintf("more%d@example.test", i), Role: store.RoleMember})
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Code != problem.RateLimited {
			t.Errorf("node %d, invitation %d of the day: %v, want rate_limited", i+1, account.InvitesPerDay+1, err)
		}
	}
}
