package account_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store/postgres"
)

// Two nodes of a cluster (two account services, each on its own pool of one
// PostgreSQL database, as two servers are) that share the reset mails'
// windows send an account ResetMailsPerHour reset mails an hour between
// them, not that many each, however the requests split between them.
func TestResetMailsCountedOnceInCluster(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	log := slog.New(slog.DiscardHandler)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	cfg := account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}
	var nodes [2]*account.Service
	var st *postgres.Store
	for i := range nodes {
		s, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		st = s
		mailer, err := mail.New(mail.Config{PublicURL: "http://localhost"}, s, log, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if nodes[i], err = account.New(cfg, s, mailer, log, clk.Now); err != nil {
			t.Fatal(err)
		}
		w, err := s.Windows(account.ResetScope, account.ResetRate())
		if err != nil {
			t.Fatal(err)
		}
		nodes[i].ShareResetMails(w)
	}
	const email = "owner@acme.test"
	if _, _, _, err := nodes[0].CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: email, Password: "Correct horse battery 9"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * account.ResetMailsPerHour {
		if err := nodes[i%2].ForgotPassword(context.Background(), email); err != nil {
			t.Fatalf("ask %d: %v", i+1, err)
		}
	}
	mails, err := st.Mails(false)
	if err != nil {
		t.Fatal(err)
	}
	resets := 0
	for _, m := range mails {
		if m.To == email && strings.Contains(m.Text, "/reset-password?token=") {
			resets++
		}
	}
	if resets != account.ResetMailsPerHour {
		t.Errorf("%d asks split between two nodes sent %d reset mails, want %d", 2*account.ResetMailsPerHour, resets, account.ResetMailsPerHour)
	}
}
