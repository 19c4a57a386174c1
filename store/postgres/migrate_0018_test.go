package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Migration 0018 (the outbox indexed by company and entry) on a database
// of 0017 with deliveries pending: it indexes the rows already there, and
// the dispatcher's pass, which reads through that index, passes over a
// full company without reading its backlog and takes the others' oldest
// first.
func TestMigration0018IndexesThePendingDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, ms, conn := migrationDB(t)
	if len(ms) < 18 || ms[17].version != 18 || ms[17].name != "entry_due" {
		t.Fatalf("migration 0018 is not where this test reads it: %d migrations", len(ms))
	}
	s := openURL(t, url, Options{})
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	// Back to 0017 before any delivery is written: they are written
	// without the index, as on a database of 0017 (0019 to 0021, which
	// followed, undone first).
	for _, sql := range append(back0020,
		"DROP INDEX messages_handed",
		"DELETE FROM schema_version WHERE version = 20",
		"DROP TABLE login_windows",
		"DELETE FROM schema_version WHERE version = 19",
		"DROP INDEX webhook_deliveries_entry_due",
		"DELETE FROM schema_version WHERE version = 18",
	) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	full := dueTenant(t, s, "full", 2, 1000, at)
	other := dueTenant(t, s, "other", 1, 3, at.Add(500*time.Microsecond))

	if v, err := migrate(ctx, conn, ms[:18], false); err != nil || v != 18 {
		t.Fatalf("migrate 0017 to 0018: %d, %v", v, err)
	}
	var def string
	if err := conn.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = 'webhook_deliveries_entry_due'").Scan(&def); err != nil ||
		!strings.Contains(def, "ON public.webhook_deliveries USING btree (company_id, webhook_id, next_attempt_at, id)") {
		t.Fatalf("the index after 0018: %q (%v)", def, err)
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) webhook_deliveries"); err != nil {
		t.Fatal(err)
	}
	due, read := duePassReads(t, s, time.Now(), 64, func(d store.WebhookDue) store.DueVerdict {
		if d.CompanyID == full.CompanyID {
			return store.DuePassCompany
		}
		return store.DueTake
	})
	if len(due) != 3 || due[0].WebhookID != other.Entries[0].ID || due[0].ID >= due[1].ID || due[1].ID >= due[2].ID {
		t.Fatalf("after 0018 the pass took %+v, want other's 3 in due order", due)
	}
	// The walk in due order reads a page (its rows and their index
	// entries) before it reads by entry: a few per entry besides.
	if want := int64(2*dueWalkPage + 40); read > want {
		t.Fatalf("after 0018 the pass read %d rows and index entries of the outbox, want at most %d (a page in due order, then a few per entry of 3)", read, want)
	}
}
