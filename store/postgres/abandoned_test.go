package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// dumpTables reads every row of every table of the schema, as text, by
// table.
func dumpTables(t *testing.T, s *Store) map[string]map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := s.pool.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int{}
	for _, table := range tables {
		rows, err := s.pool.Query(ctx, "SELECT t::text FROM "+pgx.Identifier{table}.Sanitize()+" t")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out[table] = map[string]int{}
		for _, r := range got {
			out[table][r]++
		}
	}
	return out
}

// An abandoned sign-up goes with every row of it: after the prune, every
// table of the schema holds what it held before the sign-up, row for row,
// and the identity sequences give the address's new sign-up new ids.
func TestAbandonedSignupLeavesNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	cutoff := now.Add(-8 * 24 * time.Hour)
	kept, _ := conformance.Company(t, s)
	conformance.Device(t, s, kept.ID, "fp-kept")
	before := dumpTables(t, s)

	c, u, _ := conformance.Signup(t, s, "stranger@example.com", cutoff.Add(-time.Hour))
	if err := s.PutOneTimeToken([]byte("reset-spent"), store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: cutoff}); err != nil {
		t.Fatal(err)
	}
	n, last, err := s.PruneAbandonedSignups(cutoff, now, 0, 100)
	if err != nil || n != 1 || last != 0 {
		t.Fatalf("PruneAbandonedSignups: %d removed, last %d (%v), want 1 and 0", n, last, err)
	}
	after := dumpTables(t, s)
	for table, rows := range after {
		for r, k := range rows {
			if before[table][r] != k {
				t.Errorf("left in %s after the prune: %s", table, r)
			}
		}
		for r := range before[table] {
			if rows[r] == 0 {
				t.Errorf("the prune removed a row of another company from %s: %s", table, r)
			}
		}
	}
	again, owner, _ := conformance.Signup(t, s, "stranger@example.com", now)
	if again.ID <= c.ID || owner.ID <= u.ID {
		t.Fatalf("the new sign-up got company %d user %d, after %d and %d", again.ID, owner.ID, c.ID, u.ID)
	}
}

func TestAbandonedSignupRecords(t *testing.T) {
	t.Parallel()
	conformance.AbandonedSignupRecords(t, openStore(t, Options{}))
}

// TestAbandonedSignupKeptForALinkMailedDuringThePrune: a password reset
// asked for while the prune of the sign-up waits for the company's row,
// after it read the owner's links: the owner holds a live link when the
// prune gets the row, so the company stays, with the link.
func TestAbandonedSignupKeptForALinkMailedDuringThePrune(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	cutoff := now.Add(-8 * 24 * time.Hour)
	c, u, _ := conformance.Signup(t, s, "late-reset@example.com", cutoff.Add(-48*time.Hour))
	ctx := context.Background()
	hold, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // let go below; this frees the prune on a failure
	if _, err := hold.Exec(ctx, "SELECT 1 FROM companies WHERE id = $1 FOR UPDATE", int64(c.ID)); err != nil {
		t.Fatal(err)
	}
	var removed int
	var perr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		removed, _, perr = s.PruneAbandonedSignups(cutoff, now, c.ID-1, 1)
	}()
	waitLocks(t, s, 1)
	reset := []byte("reset-during-prune")
	if err := s.PutOneTimeToken(reset, store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if perr != nil || removed != 0 {
		t.Fatalf("PruneAbandonedSignups: %d removed (%v), want 0", removed, perr)
	}
	if _, err := s.Company(c.ID); err != nil {
		t.Fatalf("the company whose owner was mailed a reset link: %v, want it kept", err)
	}
	if _, err := s.ConsumeOneTimeToken(reset, []string{"reset"}, now, true, func(*store.User) error { return nil }); err != nil {
		t.Fatalf("the reset link: %v", err)
	}
}

// The tables an abandoned sign-up must have no row in are read from the
// catalogue by the prune's batch, not once at Open: a table that a newer
// binary's migration adds while a server has the database open (its admin
// commands migrate first) is looked in too, and a company with a row in it
// stays.
func TestAbandonedSignupSeesATableAddedAfterOpen(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	cutoff := now.Add(-8 * 24 * time.Hour)
	gone, _, _ := conformance.Signup(t, s, "gone@example.com", cutoff.Add(-time.Hour))
	kept, _, _ := conformance.Signup(t, s, "kept@example.com", cutoff.Add(-time.Hour))
	if _, err := s.pool.Exec(t.Context(), "CREATE TABLE later_records (company_id bigint NOT NULL REFERENCES companies (id))"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), "INSERT INTO later_records (company_id) VALUES ($1)", id(kept.ID)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []uint64{gone.ID, kept.ID} {
		if _, _, err := s.PruneAbandonedSignups(cutoff, now, c-1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Company(gone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the abandoned sign-up: %v, want it removed", err)
	}
	if _, err := s.Company(kept.ID); err != nil {
		t.Errorf("the sign-up with a row in a table added after Open: %v, want it kept", err)
	}
}
