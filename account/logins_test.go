package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store/boltstore"
)

func newLoginsService(t *testing.T, cfg Config) *Service {
	t.Helper()
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.PasswordTime, cfg.PasswordMemory = 1, 64
	s, err := New(cfg, st, nil, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// However many e-mail addresses are tried, one node keeps at most
// MaxLoginAddresses of them, each under a key of 22 bytes whatever the
// address's length.
func TestFailedLoginsMemoryBounded(t *testing.T) {
	t.Parallel()
	const bound = 64
	s := newLoginsService(t, Config{MaxLoginAddresses: bound})
	long := fmt.Sprintf("%0200d", 0)
	for i := range 20 * bound {
		email := fmt.Sprintf("u%d.%s@example.test", i, long[:i%200])
		if _, err := s.Login(context.Background(), email, "Wrong-Horse-9"); err == nil {
			t.Fatal("an unknown address logged in")
		}
	}
	if n := s.failedLogins.Len(); n > bound {
		t.Fatalf("%d addresses tracked, want at most %d", n, bound)
	}
	if k := s.loginKey("a-rather-long-address-" + long + "@example.test"); len(k) != 22 {
		t.Fatalf("key %q: %d bytes, want 22", k, len(k))
	}
}

// Tries sent at once cannot all be checked before the first failures are
// counted: of many at once, at most the limit are checked, the rest are
// refused without a hash.
func TestFailedLoginsCountedBeforeTheCheck(t *testing.T) {
	t.Parallel()
	s := newLoginsService(t, Config{})
	const tries = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	checked, refused := 0, 0
	for range tries {
		wg.Go(func() {
			_, err := s.Login(context.Background(), "victim@example.test", "Wrong-Horse-9")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case problem.Is(err, problem.InvalidLogin):
				checked++
			case problem.Is(err, problem.RateLimited):
				refused++
			default:
				t.Errorf("a try: %v", err)
			}
		})
	}
	wg.Wait()
	if limit := DefaultLoginRate.Limit; checked != limit || refused != tries-limit {
		t.Fatalf("%d tries at once: %d checked, %d refused; want %d and %d", tries, checked, refused, limit, tries-limit)
	}
}

// deadWindows are shared windows whose database does not answer.
type deadWindows struct{}

func (deadWindows) Take(string) (pacing.Result, error) {
	return pacing.Result{}, errors.New("no database")
}
func (deadWindows) Refund(string) error { return errors.New("no database") }

// While the cluster's shared count does not answer, a node counts failed
// logins in its own memory, as one node does: no login is refused for the
// server's fault, and the bound still holds on the node.
func TestFailedLoginsCountedLocallyWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	s := newLoginsService(t, Config{})
	s.ShareFailedLogins(deadWindows{})
	for i := range DefaultLoginRate.Limit {
		if _, err := s.Login(context.Background(), "victim@example.test", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
			t.Fatalf("failure %d: %v, want invalid_credentials", i+1, err)
		}
	}
	if _, err := s.Login(context.Background(), "victim@example.test", "Wrong-Horse-9"); !problem.Is(err, problem.RateLimited) {
		t.Fatalf("the failure after the limit: %v, want rate_limited", err)
	}
}
