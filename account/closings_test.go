package account_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
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
	// A line after the company's creation: its end, logged one way or the other.
	poll.Within(t, 10*time.Second, "a log line of the company's end", func() bool {
		return strings.Count(logs.String(), "company_id=") >= 2
	})
	if strings.Contains(logs.String(), `msg="company removed"`) {
		t.Errorf("a company another run removed is logged as removed here:\n%s", logs.String())
	}
}

// failingSteps is a real store whose removal steps fail while fail is set,
// as a database out of reach fails them; it counts the steps tried and the
// sweeps (each lists the companies closing).
type failingSteps struct {
	store.Backend
	fail   atomic.Bool
	steps  atomic.Int64
	sweeps atomic.Int64
}

func (s *failingSteps) ClosingCompanies() ([]uint64, error) {
	s.sweeps.Add(1)
	return s.Backend.ClosingCompanies()
}

func (s *failingSteps) RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error) {
	s.steps.Add(1)
	if s.fail.Load() {
		return store.CompanyRemoval{}, errors.New("store: remove company: the database does not answer")
	}
	return s.Backend.RemoveCompanyStep(companyID, limit)
}

// A closing company whose removal step fails is not tried every sweep
// without end: it waits one sweep after its first failure, twice as long
// after each one more (up to an hour, ClosingRetryAfter), each failure
// logged as "company removal failing" and counted (ClosingsFailing,
// ClosingFailures, the server's metrics), and its removal ends once a
// step succeeds again. The sweeps run every few milliseconds of real time;
// the waits are of the server's clock, which the test moves.
func TestFailingRemovalBacksOff(t *testing.T) {
	t.Parallel()
	st := &failingSteps{Backend: storetest.Open(t)}
	st.fail.Store(true)
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	c, _, _, err := svc.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", Email: fmt.Sprintf("ana-%d@backoff.test", time.Now().UnixNano()), Password: "Correct-Horse-9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkCompanyClosing(c.ID, clk.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	const sweep = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.RunClosings(ctx, sweep) }()
	defer func() { cancel(); <-done }()

	// tried waits for the company's nth try; then for three sweeps more,
	// which try nothing while the clock stands before the next is due.
	tried := func(n int64) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("try %d", n), func() bool { return st.steps.Load() >= n })
		seen := st.sweeps.Load()
		poll.Until(t, "three sweeps more", func() bool { return st.sweeps.Load() >= seen+3 })
		if got := st.steps.Load(); got != n {
			t.Fatalf("tries: %d, want %d (the next is not due by the server's clock)", got, n)
		}
	}
	tried(1)
	if svc.ClosingsFailing() != 1 || svc.ClosingFailures() != 1 {
		t.Fatalf("failing: %d, failures %d, want 1 and 1", svc.ClosingsFailing(), svc.ClosingFailures())
	}
	clk.Advance(sweep) // one sweep after the first failure
	tried(2)
	clk.Advance(sweep) // two after the second
	tried(2)
	clk.Advance(sweep)
	tried(3)
	clk.Advance(3 * sweep) // four after the third
	tried(3)
	clk.Advance(sweep)
	tried(4)
	if svc.ClosingsFailing() != 1 || svc.ClosingFailures() != 4 {
		t.Fatalf("failing: %d, failures %d, want 1 and 4", svc.ClosingsFailing(), svc.ClosingFailures())
	}
	for _, want := range []string{
		fmt.Sprintf(`msg="company removal failing: a step failed; tried again later" company_id=%d failures=1 retry_in=5ms`, c.ID),
		fmt.Sprintf(`company_id=%d failures=4 retry_in=40ms`, c.ID),
		"the database does not answer",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log has no %q:\n%s", want, logs.String())
		}
	}

	st.fail.Store(false)
	clk.Advance(8 * sweep)
	poll.Until(t, "the company removed once its steps succeed", func() bool {
		_, err := st.Company(c.ID)
		return errors.Is(err, store.ErrNotFound)
	})
	poll.Until(t, "no removal failing", func() bool { return svc.ClosingsFailing() == 0 })
	if svc.ClosingFailures() != 4 {
		t.Errorf("failures: %d, want the 4 counted", svc.ClosingFailures())
	}
	poll.Until(t, "the removal logged", func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf(`msg="company removed" company_id=%d`, c.ID))
	})
}

// The wait after each failure in a row doubles from the sweep's period
// and stops at an hour.
func TestClosingRetryAfter(t *testing.T) {
	t.Parallel()
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for i, w := range want {
		if got := account.ClosingRetryAfter(time.Minute, i+1); got != w {
			t.Errorf("after %d failures: %s, want %s", i+1, got, w)
		}
	}
	if got := account.ClosingRetryAfter(time.Minute, 1000); got != account.MaxClosingBackoff {
		t.Errorf("after 1000 failures: %s, want %s", got, account.MaxClosingBackoff)
	}
}
