package webhook

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// twoNodes are the fixtures of two nodes, a and b, on one database: a
// company with one device, phone-1, made through a.
func twoNodes(t *testing.T, a, b *postgres.Store) (f, fb *fixture) {
	t.Helper()
	f = &fixture{t: t, dir: t.TempDir(), st: a, device: "phone-1"}
	c := store.Company{Name: "Acme", APIKeyHash: []byte("k")}
	u := store.User{FirstName: "Ana", Email: "ana@example.com", EmailVerified: true, PasswordHash: "x"}
	if err := a.CreateCompany(&c, &u); err != nil {
		t.Fatal(err)
	}
	f.company = c.ID
	f.addDevice(f.device)
	return f, &fixture{t: t, dir: f.dir, st: b, company: c.ID, device: f.device, seq: 1000}
}

// Two nodes (two stores on one PostgreSQL database, a dispatcher each, on a
// cluster's poll) deliver the events enqueued on both: each delivery id
// reaches the receiver once, including those enqueued on one node and
// claimed by the other.
func TestTwoNodesDeliverEachOnce(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	a, b := pgNode(t, url, postgres.Options{}), pgNode(t, url, postgres.Options{})
	f, fb := twoNodes(t, a, b)

	recv := webhooktest.NewReceiver(t, true, nil)
	cfg := Config{AllowPrivate: true, RootCAs: recv.Pool(), Workers: 2, Poll: 50 * time.Millisecond}
	svcA, _ := f.start(cfg, nil)
	svcB, _ := fb.start(cfg, nil)
	f.configure(svcA, EntryInput{URL: recv.URL + "/a"}, EntryInput{URL: recv.URL + "/b"})

	const events = 20
	for i := range events {
		if i%2 == 0 {
			f.inbound(svcA, f.device, "SIM1", time.Now())
		} else {
			fb.inbound(svcB, f.device, "SIM1", time.Now())
		}
	}
	want := events * 2
	eventually(t, "every delivery made", func() bool { return len(recv.Requests()) >= want })
	eventually(t, "the outbox empty", func() bool {
		due, _, err := a.DueWebhookDeliveries(time.Now().Add(time.Hour), 10, nil)
		return err == nil && len(due) == 0
	})
	seen := map[string]int{}
	for _, r := range recv.Requests() {
		seen[r.Header.Get(HeaderDelivery)]++
	}
	if len(seen) != want {
		t.Fatalf("%d delivery ids arrived, want %d", len(seen), want)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s arrived %d times, want once", id, n)
		}
	}
}
