package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Migration 0015 (cluster_nodes.version) on a database of 0014, and the
// binary of 0014 beside it:
//   - the rows of 0014's registry are kept, with no version (”, which the
//     nodes' warning shows as "unknown");
//   - a node of the 0014 binary started on the 0015 schema is refused at its
//     start with ErrSchemaTooNew, saying both versions (docs/cluster.md,
//     Upgrading the nodes);
//   - a node of the 0014 binary that checked the schema just before a new
//     node migrated it (its beats are not in the registry yet, so the
//     migration does not wait for it) keeps working: its registry
//     statements, which name no version, still run on 0015, and the new
//     nodes read its row as of no version.
func TestMigration0015OnA0014Database(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, ms, conn := migrationDB(t)
	if len(ms) < 15 || ms[13].version != 14 || ms[14].name != "node_versions" {
		t.Fatalf("migrations 0014 and 0015 are not where this test reads them: %d migrations", len(ms))
	}
	// The 0014 binary's registry statements, as it runs them (store/postgres/cluster.go then).
	const (
		register0014 = `INSERT INTO cluster_nodes (name, started_at, seen_at, bus, instance) VALUES ($1, now(), now(), $2, $3)
			ON CONFLICT (name) DO UPDATE SET started_at = now(), seen_at = now(), bus = $2, instance = $3`
		live0014 = `SELECT name, started_at, seen_at, bus, instance FROM cluster_nodes
			WHERE seen_at > now() - make_interval(secs => $1) ORDER BY name`
	)
	if v, err := migrate(ctx, conn, ms[:14], false); err != nil || v != 14 {
		t.Fatalf("migrate to 0014: %d, %v", v, err)
	}
	if _, err := conn.Exec(ctx, register0014, "stopped", true, "i-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE cluster_nodes SET seen_at = now() - interval '1 minute'"); err != nil {
		t.Fatal(err)
	}

	if v, err := migrate(ctx, conn, ms[:15], false); err != nil || v != 15 {
		t.Fatalf("migrate 0014 to 0015: %d, %v", v, err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SELECT version FROM cluster_nodes WHERE name = 'stopped'").Scan(&version); err != nil || version != "" {
		t.Fatalf("a row of 0014 after 0015: version %q (%v), want kept with ''", version, err)
	}

	_, err := migrate(ctx, conn, ms[:14], false)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "it is at version 15, this simrelay knows up to 14") {
		t.Fatalf("the 0014 binary starting on 0015: %v, want ErrSchemaTooNew naming both versions", err)
	}

	// A new node, opened before the old one beats (Open would refuse a
	// later migration under it).
	s := openURL(t, url, Options{})
	if _, err := conn.Exec(ctx, register0014, "old", true, "i-1"); err != nil {
		t.Fatalf("the 0014 binary's beat on 0015: %v", err)
	}
	rows, err := conn.Query(ctx, live0014, 10)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var n Node
		return n.Name, r.Scan(&n.Name, &n.StartedAt, &n.SeenAt, &n.Bus, &n.Instance)
	})
	if err != nil || len(names) != 1 || names[0] != "old" {
		t.Fatalf("the 0014 binary's read of the live nodes on 0015: %v (%v), want old", names, err)
	}
	if err := s.RegisterNode(Node{Name: "new", Instance: "i-2", Bus: true, Version: "v-new"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	nodes, err := s.LiveNodes(10 * time.Second)
	if err != nil || len(nodes) != 2 || nodes[0].Name != "new" || nodes[0].Version != "v-new" || nodes[1].Name != "old" || nodes[1].Version != "" {
		t.Fatalf("live nodes read by a new node: %+v (%v), want new at v-new and old of no version", nodes, err)
	}
}
