package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
)

// A newer simrelay does not migrate a schema that nodes of the older one
// run on (a rolling upgrade): it refuses, naming them, and the schema stays
// as they know it. Once their beats are older than the live window (they
// were stopped, or killed a while ago), it migrates.
func TestMigrationRefusedWhileOlderNodesRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, ms, conn := migrationDB(t)
	older := len(ms) - 1 // the schema of the release before this one
	if _, err := migrate(ctx, conn, ms[:older], false); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO cluster_nodes (name, started_at, seen_at, bus, instance)
		VALUES ('old-1', now(), now(), true, 'a'), ('old-2', now(), now(), true, 'b'), ('gone', now(), now() - interval '1 minute', true, 'c')`); err != nil {
		t.Fatal(err)
	}

	_, err := Open(ctx, url, Options{})
	if !errors.Is(err, ErrNodesRunning) || !strings.Contains(err.Error(), "old-1, old-2") || strings.Contains(err.Error(), "gone") {
		t.Fatalf("opened with older nodes running: %v; want ErrNodesRunning naming old-1 and old-2 only", err)
	}
	if v, err := schemaVersion(ctx, conn); err != nil || v != older {
		t.Fatalf("schema version after the refusal: %d (%v), want %d", v, err, older)
	}

	if _, err := conn.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	s := open(t, url)
	if v, err := s.SchemaVersion(ctx); err != nil || v != latest(t) {
		t.Fatalf("schema version once the nodes stopped: %d (%v), want %d", v, err, latest(t))
	}
}

// migrationDB is a new database without a schema, the embedded migrations
// and a connection to the database, closed when the test ends: for tests
// that migrate it step by step.
func migrationDB(t *testing.T) (url string, ms []migration, conn *pgx.Conn) {
	t.Helper()
	url = pgtest.URL(t)
	ms, err := loadMigrations(embedded)
	if err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return url, ms, conn
}

// A node that opened the store before a newer simrelay migrated the schema
// (the migration found no beat of it yet, so it did not wait) is refused
// when it registers, saying so, and never beats on a schema it does not
// know. It registered and ran on before.
func TestRegisterRefusedOnASchemaMigratedSinceOpen(t *testing.T) {
	t.Parallel()
	s := openURL(t, migrated(t), Options{})
	if _, err := s.pool.Exec(context.Background(), "INSERT INTO schema_version (version, name) VALUES ($1, 'from_a_newer_simrelay')", latest(t)+1); err != nil {
		t.Fatal(err)
	}
	err := s.RegisterNode(Node{Name: "late", Instance: "i", Bus: true, Version: "v-old"}, 10*time.Second)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), fmt.Sprintf("migrated to version %d since this node opened it at %d", latest(t)+1, latest(t))) {
		t.Fatalf("registering on a schema migrated since Open: %v, want ErrSchemaTooNew naming both versions", err)
	}
	if nodes, err := s.LiveNodes(10 * time.Second); err != nil || len(nodes) != 0 {
		t.Fatalf("live nodes after the refusal: %+v (%v), want none", nodes, err)
	}
}
