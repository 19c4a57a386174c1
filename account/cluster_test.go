package account_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/store"
)

// A node that missed a rotation's signal (here the rotating node had no bus
// at all) accepts the old key from its cache for at most the cache's TTL,
// then reads the store again and refuses it.
func TestClusteredKeyCacheExpires(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	log := slog.New(slog.DiscardHandler)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	cfg := account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}
	node, err := account.New(cfg, st, nil, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	deaf, err := account.New(cfg, st, nil, log, clk.Now) // rotates without telling anyone
	if err != nil {
		t.Fatal(err)
	}
	bus, err := cluster.Connect(context.Background(), cluster.Config{URL: natstest.Start(t), Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	peers, err := cluster.NewPeers(bus, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 10 * time.Second
	if err := node.SetPeers(cluster.NewCaches(bus, peers, 0), ttl); err != nil {
		t.Fatal(err)
	}
	c, _, key, err := node.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "a@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Authenticate(context.Background(), key); err != nil { // cached now
		t.Fatal(err)
	}
	if _, _, err := deaf.RotateAPIKey(context.Background(), account.Principal{CompanyID: c.ID, Role: store.RoleAdmin, ViaAPIKey: true}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ttl - time.Second)
	if _, err := node.Authenticate(context.Background(), key); err != nil {
		t.Fatalf("within the TTL the cached key still passes (what the TTL bounds): %v", err)
	}
	clk.Advance(time.Second)
	if _, err := node.Authenticate(context.Background(), key); err == nil {
		t.Fatal("past the TTL the old key still passes")
	}
}
