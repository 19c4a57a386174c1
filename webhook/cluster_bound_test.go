package webhook

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// pgNode opens a PostgreSQL store on url: one node of a cluster.
func pgNode(t *testing.T, url string, opt postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two nodes deliver one company's events: each delivery reaches its
// receiver once, and while the receivers hang the company holds at most
// PerCompany attempts in the whole cluster, not PerCompany per node.
func TestClusterDeliversOnceWithinTheCompanyBound(t *testing.T) {
	t.Parallel()
	hangAcrossNodes(t, 2, 2, 2) // two entries of bound 1 each: the company's bound binds
}

// One entry that hangs holds at most its entry bound (half the company's)
// in the whole cluster, leaving room for its company's other entries.
func TestClusterHangingEntryWithinItsBound(t *testing.T) {
	t.Parallel()
	hangAcrossNodes(t, 1, 4, 2)
}

// hangAcrossNodes runs two nodes' dispatchers on one company with entries
// entries (all hanging) and the bound perCompany, checks that the attempts
// hanging at once across both reach want and never pass it, then that once
// released every delivery arrives once.
func hangAcrossNodes(t *testing.T, entries, perCompany, want int) {
	t.Helper()
	url := pgtest.URL(t)
	a, b := pgNode(t, url, postgres.Options{}), pgNode(t, url, postgres.Options{})
	c := store.Company{Name: "Acme", APIKeyHash: []byte("k")}
	if err := a.CreateCompany(&c, &store.User{FirstName: "Ana", Email: "ana@example.com", EmailVerified: true, PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: a, company: c.ID, device: "phone-1"}
	f.addDevice(f.device)

	h := newHanger()
	rc := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		h.hang(r)
		return http.StatusNoContent
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(h.release)
		}
	}
	defer release() // before the receiver closes: it waits for its handlers
	cfg := Config{AllowPrivate: true, RootCAs: rc.Pool(), Workers: 4, PerCompany: perCompany, Timeout: time.Minute, Poll: 50 * time.Millisecond}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var svcs []*Service
	for _, st := range []store.Backend{a, b} {
		svc, err := New(cfg, st, log, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = svc.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		svcs = append(svcs, svc)
	}
	var inputs []EntryInput
	for i := range entries {
		inputs = append(inputs, EntryInput{URL: fmt.Sprintf("%s/%d", rc.URL, i)})
	}
	f.configure(svcs[0], inputs...)
	const events = 6
	for range events {
		f.inbound(svcs[0], f.device, "SIM1", time.Now())
	}
	eventually(t, "the bound of attempts hanging", func() bool {
		hanging, _ := h.counts()
		return hanging == want
	})
	// Both nodes poll every 50 ms: let a few polls pass (bounded in time),
	// in none of which may a node start an attempt over the bound.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, most := h.counts(); most > want {
			break
		}
	}
	if _, most := h.counts(); most > want {
		t.Fatalf("%d attempts at once across two nodes, want at most %d", most, want)
	}
	release()
	eventually(t, "every delivery received", func() bool { return len(rc.Requests()) >= entries*events })
	eventually(t, "the outbox emptied", func() bool {
		n, _, err := b.WebhookOutboxSize(c.ID)
		return err == nil && n == 0
	})
	seen := map[string]int{}
	for _, r := range rc.Requests() {
		seen[r.Header.Get(HeaderDelivery)]++
	}
	if len(seen) != entries*events {
		t.Errorf("%d deliveries received, want %d", len(seen), entries*events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("delivery %s received %d times, want once", id, n)
		}
	}
}
