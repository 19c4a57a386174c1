package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/simrelay/simrelay/store"
)

// Options.Empty (the bench's open) refuses a database holding a company,
// or another application's tables, before writing anything: a database of
// an older schema with a company in it stays at that schema. A new
// database, and simrelay's without a company, are opened and migrated.
func TestEmptyRefusesBeforeMigrating(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, ms, conn := migrationDB(t)
	older := len(ms) - 1
	if v, err := migrate(ctx, conn, ms[:older], false); err != nil || v != older {
		t.Fatalf("migrate to %d: %d, %v", older, v, err)
	}
	version := func(c *pgx.Conn) int {
		var v int
		if err := c.QueryRow(ctx, "SELECT max(version) FROM schema_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// simrelay's, older, no company: opened and migrated.
	s := openURL(t, url, Options{Empty: true})
	if got := version(conn); got != len(ms) {
		t.Fatalf("an older schema without a company is at %d after the open, want %d", got, len(ms))
	}
	s.Close()

	url2, _, conn2 := migrationDB(t)
	if _, err := migrate(ctx, conn2, ms[:older], false); err != nil {
		t.Fatal(err)
	}
	if _, err := conn2.Exec(ctx, `INSERT INTO companies (api_key_hash, rec) VALUES ('\x01', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url2, Options{Empty: true}); !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("a database with a company: %v, want store.ErrNotEmpty", err)
	}
	if got := version(conn2); got != older {
		t.Fatalf("the refused database was migrated to %d, want it left at %d", got, older)
	}

	url3, _, conn3 := migrationDB(t)
	if _, err := conn3.Exec(ctx, "CREATE TABLE invoices (id int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url3, Options{Empty: true}); !errors.Is(err, ErrNoSchema) {
		t.Fatalf("another application's database: %v, want ErrNoSchema", err)
	}
	var exists bool
	if err := conn3.QueryRow(ctx, "SELECT to_regclass('schema_version') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("the refused database got simrelay's schema (%v, %v)", exists, err)
	}
}
