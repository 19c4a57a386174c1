package account_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// removedLog records the companies OnRemoved is told of.
type removedLog struct {
	mu  sync.Mutex
	ids []uint64
}

func (r *removedLog) add(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

func (r *removedLog) has(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.ids, id)
}

// Each company whose removal ends is told of, so that what the server
// keeps in memory per company goes with it (the agent channels' governor):
// closed by its admin and removed in that one step, finished by the
// sweep, or found finished by another run. A company only closing is not.
func TestRemovedCompaniesAreTold(t *testing.T) {
	t.Parallel()
	bolt := openStore(t)
	st := &finishedElsewhere{Store: bolt}
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil, slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	var told removedLog
	svc.OnRemoved(told.add)
	create := func(name, email string) store.Company {
		t.Helper()
		c, _, _, err := svc.CreateCompany(name, account.OwnerInput{FirstName: "Ana", Email: email, Password: "Correct-Horse-9"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	closed := create("Closed", "ana@closed.test")
	users, err := bolt.CompanyUsers(closed.ID)
	if err != nil || len(users) != 1 {
		t.Fatalf("users: %v (%v)", users, err)
	}
	if _, err := svc.CloseCompany(context.Background(), account.Principal{CompanyID: closed.ID, UserID: users[0].ID, Role: store.RoleAdmin}, "Closed", nil); err != nil {
		t.Fatal(err)
	}
	if !told.has(closed.ID) {
		t.Fatal("a company its admin closed, removed in one step: not told")
	}

	swept := create("Swept", "ana@swept.test")
	elsewhere := create("Elsewhere", "ana@elsewhere.test")
	kept := create("Kept", "ana@kept.test")
	for _, c := range []store.Company{swept, elsewhere} {
		if _, err := bolt.MarkCompanyClosing(c.ID, clk.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	st.before = func() { conformance.RemoveCompany(t, bolt, elsewhere.ID, 1000) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.RunClosings(ctx, time.Hour) }()
	defer func() { cancel(); <-done }()
	poll.Within(t, 10*time.Second, "the swept and the elsewhere-removed companies told", func() bool {
		return told.has(swept.ID) && told.has(elsewhere.ID)
	})
	if told.has(kept.ID) {
		t.Fatal("a company not closing was told removed")
	}
}
