package main

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/postgres"
)

// A node's secrets go on the bus as digests keyed with a secret of its
// database: a token a person typed cannot be tested against what the bus
// carries by whoever reads it without the database. Two nodes of one
// database say the same digest of the same token (they compare); a node of
// another database says another one, and no message holds the token.
func TestSettingsDigestsAreKeyedByTheDatabase(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	natsURL := natstest.Start(t)
	one, other := pgtest.URL(t), pgtest.URL(t)
	const token = "our simrelay admin token, typed by hand"
	cfg := &serveConfig{adminToken: token, stripeKey: "sk_test_shared"}

	var mu sync.Mutex
	said := map[string]map[string]string{} // node -> its settings
	raw := map[string]string{}
	heardBy := map[string]string{} // node -> the database whose subjects carried it
	// A listener on each database's subjects, as a node of it.
	for _, db := range []string{one, other} {
		st, err := postgres.Open(context.Background(), db, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		listener, err := connectBus(context.Background(), natsURL, "listener", st, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(listener.Close)
		if err := listener.Subscribe("peers.settings", func(m cluster.Message) {
			var msg struct {
				Node     string            `json:"node"`
				Settings map[string]string `json:"settings"`
			}
			if json.Unmarshal(m.Data, &msg) == nil {
				mu.Lock()
				said[msg.Node], raw[msg.Node] = msg.Settings, string(m.Data)
				if heardBy[msg.Node] != "" && heardBy[msg.Node] != db {
					t.Errorf("%s was heard on the subjects of both databases", msg.Node)
				}
				heardBy[msg.Node] = db
				mu.Unlock()
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := listener.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	startSettingsNode(t, one, natsURL, "a1", cfg)
	startSettingsNode(t, one, natsURL, "a2", cfg)
	startSettingsNode(t, other, natsURL, "b1", cfg)
	poll.Within(t, 10*time.Second, "every node says its settings", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(said["a1"]) > 0 && len(said["a2"]) > 0 && len(said["b1"]) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if heardBy["a1"] != one || heardBy["a2"] != one || heardBy["b1"] != other {
		t.Errorf("each node must be heard on its own database's subjects only: %v", heardBy)
	}
	for _, name := range []string{"admin-token", "stripe-key"} {
		a1, a2, b1 := said["a1"][name], said["a2"][name], said["b1"][name]
		if a1 == "" || a1 != a2 {
			t.Errorf("%s: the nodes of one database say %q and %q, want one digest", name, a1, a2)
		}
		if a1 == b1 {
			t.Errorf("%s: a node of another database says the same digest %q: it depends on the value alone, so a guess can be tested against it", name, a1)
		}
	}
	for node, m := range raw {
		if strings.Contains(m, token) || strings.Contains(m, "sk_test_shared") {
			t.Errorf("%s said a secret on the bus: %s", node, m)
		}
	}
}

// startSettingsNode runs the cluster's shared limits of one node with
// cfg's settings, on its own store handle and bus connection, until the
// test ends.
func startSettingsNode(t *testing.T, dbURL, natsURL, name string, cfg *serveConfig) {
	t.Helper()
	startSharedLimits(t, dbURL, natsURL, name, cfg.sharedSettings)
}

// The nodes compare their settings each under its flag's name, which the
// WARN shows and the operator looks for: every name is a flag of serve,
// none is a flag of one node's own resources (docs/cluster.md: those may
// differ), and a flag that differs is named as itself.
func TestSharedSettingsAreNamedByTheirFlags(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (*flag.FlagSet, map[string]string) {
		t.Helper()
		cfg, fs := serveFlags()
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return fs, cfg.sharedSettings([]byte("key"))
	}
	fs, base := parse()
	own := []string{"listen", "data-dir", "node-name", "console-streams", "smtp-listen", "webhook-workers", "max-conns-per-ip", "log-level"}
	for name := range base {
		if fs.Lookup(name) == nil {
			t.Errorf("setting %q is no flag of serve", name)
		}
		if slices.Contains(own, name) {
			t.Errorf("setting %q is a node's own (docs/cluster.md), not compared", name)
		}
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--console-streams", "7"}},
		{[]string{"--console-streams-per-user", "7"}},
		{[]string{"--whatsapp-per-hour", "7"}},
		{[]string{"--imessage-gap-max", "7s"}},
		{[]string{"--signup", "closed"}},
	} {
		_, got := parse(tc.args...)
		var differ []string
		for k, v := range got {
			if base[k] != v {
				differ = append(differ, k)
			}
		}
		want := []string{strings.TrimPrefix(tc.args[0], "--")}
		if slices.Contains(own, want[0]) {
			want = nil
		}
		if !slices.Equal(differ, want) {
			t.Errorf("%v: differing settings %v, want %v", tc.args, differ, want)
		}
	}
}
