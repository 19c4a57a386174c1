package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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
	if n := s.failedLogins.local.Len(); n > bound {
		t.Fatalf("%d addresses tracked, want at most %d", n, bound)
	}
	if k := loginKey(s.loginDigest("a-rather-long-address-" + long + "@example.test")); len(k) != 22 {
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
func (deadWindows) Refund(string, time.Time) error { return errors.New("no database") }

// While the cluster's shared count does not answer, a node counts failed
// logins in its own memory, as one node does: no login is refused for the
// server's fault, and the bound still holds on the node.
func TestFailedLoginsCountedLocallyWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	s := newLoginsService(t, Config{})
	s.ShareFailedLogins(SharedLogins{deadWindows{}, deadWindows{}, deadWindows{}})
	for i := range DefaultLoginRate.Limit {
		if _, err := s.Login(context.Background(), "victim@example.test", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
			t.Fatalf("failure %d: %v, want invalid_credentials", i+1, err)
		}
	}
	if _, err := s.Login(context.Background(), "victim@example.test", "Wrong-Horse-9"); !problem.Is(err, problem.RateLimited) {
		t.Fatalf("the failure after the limit: %v, want rate_limited", err)
	}
}

// recordedWindows are shared windows in memory that record the keys they
// are given and count their statements (a Take or a Refund is one).
type recordedWindows struct {
	w          *pacing.Windows
	mu         sync.Mutex
	keys       []string
	statements int
}

func (r *recordedWindows) Take(key string) (pacing.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	r.statements++
	return r.w.Take(key), nil
}

func (r *recordedWindows) Refund(key string, end time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statements++
	r.w.Refund(key, end)
	return nil
}

// In a cluster an address's failed logins, a client's share of them and a
// device cookie's are counted in the shared windows, each under a keyed
// digest of 22 bytes that holds neither the address, the client nor the
// cookie; a login with a valid device cookie costs the shared windows no
// more statements than an untrusted one cost when only the address's count
// was shared (a failure one, a right password two), and an untrusted
// failure one more (the client's share).
func TestFailedLoginsSharedKeyedAndCheap(t *testing.T) {
	t.Parallel()
	s := newLoginsService(t, Config{})
	const email, password, client = "ana@acme.test", "Correct-Horse-9", "2001:db8:7::1"
	if _, _, _, err := s.CreateCompany("Acme", OwnerInput{FirstName: "Ana", LastName: "Admin", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	windows := func(r pacing.Rate) *recordedWindows { return &recordedWindows{w: pacing.New(r, time.Now)} }
	addresses, clients, devices := windows(s.LoginRate()), windows(s.ClientShareRate()), windows(s.DeviceRate())
	s.ShareFailedLogins(SharedLogins{Addresses: addresses, Clients: clients, Devices: devices})
	statements := func() int { return addresses.statements + clients.statements + devices.statements }
	login := func(cookie, pw string) (Session, error) {
		return s.Login(WithDevice(WithClient(context.Background(), client), cookie), email, pw)
	}

	sess, err := login("", password)
	if err != nil || sess.Device == "" {
		t.Fatalf("an untrusted right login: %v, device cookie %q", err, sess.Device)
	}
	if n := statements(); n != 4 || addresses.statements != 2 || clients.statements != 2 {
		t.Errorf("an untrusted right login: %d statements (address %d, client %d), want 4: a take and a refund of each", n, addresses.statements, clients.statements)
	}
	before := statements()
	if _, err := login("", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
		t.Fatalf("an untrusted failure: %v", err)
	}
	if n := statements() - before; n != 2 {
		t.Errorf("an untrusted failure: %d statements, want 2", n)
	}
	before = statements()
	if _, err := login(sess.Device, password); err != nil {
		t.Fatalf("a trusted right login: %v", err)
	}
	if n := statements() - before; n != 2 || devices.statements != 2 {
		t.Errorf("a trusted right login: %d statements (device %d), want 2, the device's", n, devices.statements)
	}
	before = statements()
	if _, err := login(sess.Device, "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
		t.Fatalf("a trusted failure: %v", err)
	}
	if n := statements() - before; n != 1 {
		t.Errorf("a trusted failure: %d statements, want 1", n)
	}

	for name, w := range map[string]*recordedWindows{"address": addresses, "client": clients, "device": devices} {
		if len(w.keys) == 0 {
			t.Errorf("nothing counted in the %s windows", name)
		}
		for _, k := range w.keys {
			if len(k) != 22 || strings.Contains(k, "ana") || strings.Contains(k, "2001") || strings.Contains(sess.Device, k) {
				t.Errorf("a %s window keyed %q: want a digest of 22 bytes, no address, client or cookie in it", name, k)
			}
		}
	}
	if clients.keys[0] == addresses.keys[0] || !slices.Equal(slices.Compact(slices.Clone(clients.keys)), clients.keys[:1]) {
		t.Errorf("the client's share keyed %q, the address %q: want one key of its own", clients.keys, addresses.keys[0])
	}
}

// While the cluster's shared counts do not answer, a client's share is
// counted in the node's memory, as on one node.
func TestClientSharesCountedLocallyWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	s := newLoginsService(t, Config{})
	s.ShareFailedLogins(SharedLogins{deadWindows{}, deadWindows{}, deadWindows{}})
	ctx := WithClient(context.Background(), "2001:db8:7::1")
	for i := range ClientShare {
		if _, err := s.Login(ctx, "victim@example.test", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
			t.Fatalf("failure %d: %v, want invalid_credentials", i+1, err)
		}
	}
	if _, err := s.Login(ctx, "victim@example.test", "Wrong-Horse-9"); !problem.Is(err, problem.RateLimited) {
		t.Fatalf("the client's failure after its share: %v, want rate_limited", err)
	}
}
