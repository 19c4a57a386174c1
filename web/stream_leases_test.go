package web

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// Two nodes' brokers, each with its leases on one database, count a
// company's live views together: its cap is reached over both, the next
// view is refused on either, and a view that ends frees a place on the
// other node. Each node's own counts stay its own.
func TestStreamCapsCountEveryNode(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	var brokers []*Broker
	var company uint64
	for i, node := range []string{"a", "b"} {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if i == 0 {
			c := store.Company{Name: "Acme", APIKeyHash: []byte("k")}
			if err := st.CreateCompany(&c, &store.User{Email: "a@acme.test", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
				t.Fatal(err)
			}
			company = c.ID
		}
		leases, err := st.StreamLeases(node)
		if err != nil {
			t.Fatal(err)
		}
		b := NewBroker(StreamConfig{PerCompany: 3, PerUser: 2, PerSession: 2}, nil)
		b.ShareStreams(leases, slog.New(slog.DiscardHandler))
		brokers = append(brokers, b)
	}
	type open struct {
		b        *Broker
		sub      *subscriber
		giveBack func()
	}
	// view opens a live view of the user's session on broker b, as the
	// events handler does: the node's slot, then the cluster's lease.
	view := func(b *Broker, user uint64, session string) (open, error) {
		sub, err := b.subscribe(company, user, session)
		if err != nil {
			return open{}, err
		}
		giveBack, err := b.lease(context.Background(), sub)
		if err != nil {
			b.release(sub)
			return open{}, err
		}
		return open{b, sub, giveBack}, nil
	}
	closeView := func(o open) { o.giveBack(); o.b.release(o.sub) }

	// One user: the second view on a, then one on b is the user's third.
	first, err := view(brokers[0], 1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := view(brokers[1], 1, "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := view(brokers[1], 1, "s3"); !errors.Is(err, errTooManyStreams) {
		t.Fatalf("the user's third view, on the other node: %v, want %v", err, errTooManyStreams)
	}
	if got := brokers[1].Streams(); got != 1 {
		t.Fatalf("b holds %d streams after a refusal, want 1 (the refused one's slot given back)", got)
	}
	// The company: a third user's view takes its last place, the next is
	// refused on either node.
	if _, err := view(brokers[0], 2, "s4"); err != nil {
		t.Fatal(err)
	}
	for i, b := range brokers {
		if _, err := view(b, 3, "s5"); !errors.Is(err, errTooManyCompanyStreams) {
			t.Fatalf("a fourth view of the company on node %d: %v, want %v", i, err, errTooManyCompanyStreams)
		}
	}
	closeView(first)
	if _, err := view(brokers[1], 3, "s5"); err != nil {
		t.Fatalf("a view after one ended on the other node: %v", err)
	}
}
