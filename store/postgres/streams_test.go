package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
)

// streamCompany stores a company for the leases' tests.
func streamCompany(t *testing.T, s *Store) store.Company {
	t.Helper()
	c := store.Company{Name: "Acme", APIKeyHash: []byte("streams")}
	if err := s.CreateCompany(&c, &store.User{Email: "a@acme.test", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	return c
}

// Streams opened on two nodes at once count against one company's cap:
// exactly the cap's leases are taken; each given back frees a place on
// either node; a node that starts again drops its earlier leases.
func TestStreamLeasesCountEveryNode(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := open(t, url), open(t, url)
	c := streamCompany(t, a)
	la, err := a.StreamLeases("a")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.StreamLeases("b")
	if err != nil {
		t.Fatal(err)
	}
	const perCompany, tries = 5, 20
	var mu sync.Mutex
	var taken []uint64
	var overs []string
	var wg sync.WaitGroup
	for i := range tries {
		l := la
		if i%2 == 1 {
			l = lb
		}
		wg.Go(func() {
			// Each its own user and session: only the company's cap binds.
			id, over, err := l.Take(context.Background(), c.ID, uint64(100+i), fmt.Sprint("s", i), 8, 16, perCompany)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("take %d: %v", i, err)
			case over != "":
				overs = append(overs, over)
			default:
				taken = append(taken, id)
			}
		})
	}
	wg.Wait()
	if len(taken) != perCompany || len(overs) != tries-perCompany || overs[0] != "company" {
		t.Fatalf("%d leases taken, refusals %v, of %d racing on two nodes; want exactly %d taken, the rest over the company's cap", len(taken), overs, tries, perCompany)
	}
	// One user's cap and one session's bind across nodes too.
	if err := la.Give(context.Background(), taken[0]); err != nil {
		t.Fatal(err)
	}
	if _, over, err := lb.Take(context.Background(), c.ID, 100, "s0", 8, 16, perCompany); err != nil || over != "" {
		t.Fatalf("a place given back on a, taken on b: over %q, %v", over, err)
	}
	if _, over, _ := la.Take(context.Background(), c.ID, 999, "new", 8, 16, perCompany); over != "company" {
		t.Fatalf("a sixth stream: over %q, want company", over)
	}
	// Node b starts again: its leases went with its streams.
	if _, err := b.StreamLeases("b"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM stream_leases WHERE company_id = $1", id(c.ID)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n >= perCompany {
		t.Fatalf("%d leases after b started again, want fewer than %d (b's dropped)", n, perCompany)
	}
}

// The session's and the user's caps count the leases of every node; a
// lease that expired (its node died) no longer counts, and Renew keeps a
// live node's leases and deletes the expired ones.
func TestStreamLeasesCapsAndExpiry(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := open(t, url), open(t, url)
	c := streamCompany(t, a)
	la, _ := a.StreamLeases("a")
	lb, _ := b.StreamLeases("b")
	take := func(l *StreamLeases, user uint64, session string) string {
		t.Helper()
		_, over, err := l.Take(context.Background(), c.ID, user, session, 2, 3, 100)
		if err != nil {
			t.Fatal(err)
		}
		return over
	}
	for i, want := range []string{"", "", "session"} { // two per session
		l := la
		if i == 1 {
			l = lb
		}
		if got := take(l, 1, "tab"); got != want {
			t.Fatalf("stream %d of one session: over %q, want %q", i+1, got, want)
		}
	}
	if got := take(lb, 1, "other"); got != "" {
		t.Fatalf("the user's third stream: over %q", got)
	}
	if got := take(la, 1, "third"); got != "user" {
		t.Fatalf("the user's fourth stream: over %q, want user", got)
	}
	// Node b dies: its leases expire; a renews its own and clears b's.
	if _, err := a.pool.Exec(context.Background(), "UPDATE stream_leases SET expires_at = now() - interval '1 second' WHERE node = 'b'"); err != nil {
		t.Fatal(err)
	}
	if got := take(la, 1, "third"); got != "" {
		t.Fatalf("with b's leases expired: over %q, want a place", got)
	}
	if err := la.Renew(); err != nil {
		t.Fatal(err)
	}
	var alive, gone int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FILTER (WHERE node = 'a' AND expires_at > now()), count(*) FILTER (WHERE node = 'b') FROM stream_leases").Scan(&alive, &gone); err != nil {
		t.Fatal(err)
	}
	if alive != 2 || gone != 0 {
		t.Fatalf("after a renewal: %d of a's leases alive, %d of b's left; want 2 and 0", alive, gone)
	}
	if _, _, err := la.Take(context.Background(), 424242, 1, "x", 2, 3, 100); err == nil {
		t.Fatal("a lease for a company that does not exist was taken")
	}
}
