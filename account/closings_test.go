package account_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/conformance"
)

// finishedElsewhere is the real store with one interleaving forced:
// another node (or an admin command) finishes the company's removal just
// before this server's first step of it.
type finishedElsewhere struct {
	*boltstore.Store
	mu     sync.Mutex
	before func()
}

func (s *finishedElsewhere) RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error) {
	s.mu.Lock()
	f := s.before
	s.before = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return s.Store.RemoveCompanyStep(companyID, limit)
}

// A closing company that another run removed under this server's sweep is
// not logged as removed here: the run that removed it logs it, once, with
// its counts (a cluster's two nodes logged it twice, the second with the
// counts of the steps it happened to take).
func TestClosingFinishedElsewhereIsNotLoggedAgain(t *testing.T) {
	t.Parallel()
	bolt := openStore(t)
	st := &finishedElsewhere{Store: bolt}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	c, _, _, err := svc.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", Email: "ana@elsewhere.test", Password: "Correct-Horse-9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.MarkCompanyClosing(c.ID, clk.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	st.before = func() { conformance.RemoveCompany(t, bolt, c.ID, 1000) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.RunClosings(ctx, time.Hour) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	// A line after the company's creation: its end, logged one way or the other.
	for strings.Count(logs.String(), "company_id=") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing logged of the company's end: %s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Contains(logs.String(), `msg="company removed"`) {
		t.Errorf("a company another run removed is logged as removed here:\n%s", logs.String())
	}
}
