package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
)

// leaseTenant stores a company with entries webhook entries and events
// events due now, one delivery per entry each.
func leaseTenant(t *testing.T, s *Store, entries, events int) store.WebhookSet {
	t.Helper()
	c := store.Company{Name: "Acme", APIKeyHash: []byte("leases")}
	if err := s.CreateCompany(&c, &store.User{Email: "a@acme.test", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	set, err := s.UpdateWebhookSet(c.ID, time.Now(), func(w *store.WebhookSet) error {
		for i := range entries {
			w.Entries = append(w.Entries, store.WebhookEntry{URL: fmt.Sprintf("https://hooks.example.com/%d", i), Active: true})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Second)
	for i := range events {
		err := s.write("test event", func(tx *txn) error {
			_, err := s.addWebhookEvent(tx, c.ID, at, store.OutboxLimits{}, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
				ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", i), Body: []byte(`{"type":"sms.received"}`)}
				var ds []store.WebhookDelivery
				for _, e := range set.Entries {
					ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("%s-%d", ev.ID, e.ID), EventType: "sms.received", WebhookID: e.ID, CreatedAt: at, NextAttemptAt: at})
				}
				return ev, ds, nil
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return set
}

// bounded is a dispatcher's skip for one claim: a company takes deliveries
// while its leases elsewhere and those taken by this claim are under bound.
func bounded(bound int, inside func()) store.DueSkip {
	taken := 0
	return store.SkipIf(func(d store.WebhookDue) bool {
		if inside != nil {
			inside()
			inside = nil
		}
		if d.CompanyLeased+taken >= bound {
			return true
		}
		taken++
		return false
	})
}

// Two nodes claiming one company's deliveries at the same moment take no
// more than its bound between them: the second claim counts the first's
// leases. Node a's claim is held open (inside its skip) until node b's
// claim either finished or waits for a's to end.
func TestClaimsKeepTheCompanyBoundWhenConcurrent(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := openURL(t, url, Options{}), openURL(t, url, Options{})
	// More deliveries due on each entry than a claim reads of it at once
	// (4 at first, up to 256), so that rows one claim has not reached yet
	// are free to the other.
	leaseTenant(t, a, 4, 70)
	const bound = 2

	bDone := make(chan []store.WebhookDue, 1)
	startB := func() {
		go func() {
			got, _, err := b.ClaimWebhookDeliveries(time.Now(), 10, bounded(bound, nil))
			if err != nil {
				t.Error(err)
			}
			bDone <- got
		}()
		// b either ends or waits for a's claim, seen as an advisory lock
		// not granted in this test's database (the server is shared).
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if len(bDone) > 0 {
				return
			}
			var waiting bool
			if err := a.pool.QueryRow(context.Background(),
				`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
					AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&waiting); err != nil {
				t.Error(err)
				return
			}
			if waiting {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Error("node b's claim neither ended nor waited within 10 s")
	}
	byA, _, err := a.ClaimWebhookDeliveries(time.Now(), 10, bounded(bound, startB))
	if err != nil {
		t.Fatal(err)
	}
	byB := <-bDone
	if len(byA)+len(byB) != bound {
		t.Fatalf("node a took %d and node b %d at once, want %d between them", len(byA), len(byB), bound)
	}
}

// TestEndDeadLeases: the live nodes end the outbox leases of a node whose
// beat stopped, and of a process replaced by a restart under the same
// name, at once instead of after the lease; a live node's leases, and the
// caller's own, stay.
func TestEndDeadLeases(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	const live = 10 * time.Second
	a, b, c := open(t, url), open(t, url), open(t, url)
	for _, n := range []struct {
		s    *Store
		name string
	}{{a, "node-a"}, {b, "node-b"}, {c, "node-c"}} {
		if err := n.s.RegisterNode(Node{Name: n.name, Bus: true, Instance: n.s.Holder()}, live); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	var ids []uint64
	for _, to := range []string{"a@x.test", "b@x.test", "c@x.test"} {
		m := store.Mail{To: to, Subject: "s", Text: "t", State: store.MailPending, CreatedAt: now, NextAttemptAt: now}
		if err := a.AppendMail(&m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	for i, s := range []*Store{a, b, c} {
		if _, ok, err := s.ClaimMail(ids[i]); err != nil || !ok {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
	}
	if n, err := b.EndDeadLeases(live); err != nil || n != 0 {
		t.Fatalf("ended %d leases (%v) while every node beats, want none", n, err)
	}
	// Node a stops beating (killed); node c is replaced by a new process
	// under its name, whose instance differs.
	if _, err := a.pool.Exec(context.Background(), "UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'node-a'"); err != nil {
		t.Fatal(err)
	}
	c2 := open(t, url)
	if err := c2.RegisterNode(Node{Name: "node-c", Bus: true, Instance: c2.Holder()}, live); err == nil {
		t.Fatal("a second process took node-c's name while its beat is live")
	}
	if _, err := a.pool.Exec(context.Background(), "UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'node-c'"); err != nil {
		t.Fatal(err)
	}
	if err := c2.RegisterNode(Node{Name: "node-c", Bus: true, Instance: c2.Holder()}, live); err != nil {
		t.Fatal(err)
	}
	if n, err := b.EndDeadLeases(live); err != nil || n != 2 {
		t.Fatalf("ended %d leases (%v), want node a's and node c's first process's", n, err)
	}
	for _, id := range []uint64{ids[0], ids[2]} {
		if _, ok, err := c2.ClaimMail(id); err != nil || !ok {
			t.Fatalf("mail %d after its holder died: claimed %v (%v), want it free", id, ok, err)
		}
	}
	if _, ok, _ := c2.ClaimMail(ids[1]); ok {
		t.Fatal("a live node's lease was ended")
	}
	if n, err := c2.EndDeadLeases(live); err != nil || n != 0 {
		t.Fatalf("the restarted node ended %d leases (%v), want none: its own and b's are live", n, err)
	}
}
