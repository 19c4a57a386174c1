package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store/conformance"
)

// unfilled are the tables a company of every kind (conformance.FillCompany)
// writes nothing to: the schema's own and the cluster's, the payment
// provider's event ids, which name no company, and the login and rate
// windows of requests, keyed by address or credential. The test writes a
// device's link and a stream lease itself, as a node would.
var unfilled = []string{"schema_version", "meta", "secrets", "billing_events", "cluster_nodes",
	"login_windows", "rate_windows"}

// A company with a record of every kind is removed with every row of it:
// after the removal, every table of the schema holds what it held before
// the company was made, row for row (so another company of every kind,
// made before, is as it was), and no table with a company_id column holds
// a row of it.
func TestRemoveCompanyLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 7, 100000} {
		s := openStore(t, Options{})
		conformance.FillCompany(t, s)
		before := dumpTables(t, s)
		gone := conformance.FillCompany(t, s)
		// A node's link of the company's phone, and a console's live view.
		ctx := context.Background()
		if _, err := s.pool.Exec(ctx, "INSERT INTO device_links (device_id, epoch, node, linked_at) VALUES ($1, 1, 'node-a', now())", int64(gone.Devices[0].ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "INSERT INTO stream_leases (node, company_id, user_id, session, expires_at) VALUES ('node-a', $1, $2, 's', now())", int64(gone.Company.ID), int64(gone.Users[0].ID)); err != nil {
			t.Fatal(err)
		}
		filled := dumpTables(t, s)
		for table, rows := range filled {
			grew := false
			for r, k := range rows {
				if before[table][r] != k {
					grew = true
				}
			}
			switch listed := slices.Contains(unfilled, table); {
			case !grew && !listed:
				t.Errorf("the fixture wrote nothing to table %s", table)
			case grew && listed:
				t.Errorf("unfilled lists table %s, which the fixture writes", table)
			}
		}

		conformance.RemoveCompany(t, s, gone.Company.ID, limit)
		after := dumpTables(t, s)
		for table, rows := range after {
			for r, k := range rows {
				if before[table][r] != k {
					t.Errorf("limit %d: left in %s after the removal: %s", limit, table, r)
				}
			}
			for r := range before[table] {
				if rows[r] == 0 {
					t.Errorf("limit %d: the removal took a row of another company from %s: %s", limit, table, r)
				}
			}
		}
		rows, err := s.pool.Query(ctx, companyTables)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range append(tables, "users", "companies") {
			col := "company_id"
			if table == "companies" {
				col = "id"
			}
			var n int
			if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE "+col+" = $1", int64(gone.Company.ID)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				t.Errorf("limit %d: table %s still has %d rows of company %d", limit, table, n, gone.Company.ID)
			}
		}
	}
}

// A sign-in that checked a user's password and is storing the session
// when the company's removal starts (its transaction holds the user's row
// KEY SHARE, as userStored takes it) commits first, and the removal's
// first step deletes the session with the user's others: none is left
// that no index of the company names.
func TestRemoveCompanyWaitsForASignIn(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	ctx := context.Background()
	f := conformance.FillCompany(t, s)
	u := f.Users[0]
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR KEY SHARE", int64(u.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO console_sessions (hash, user_id, seen_at, expires_at, rec) VALUES ('\\x6c617465', $1, now(), now() + interval '1 hour', '{}')", int64(u.ID)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.RemoveCompanyStep(f.Company.ID, 1)
		done <- err
	}()
	// The removal waits on the sign-in's lock of the user.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the removal's step ended (%v) while a sign-in held its user", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the removal never waited on the sign-in")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM console_sessions WHERE user_id = $1", int64(u.ID)).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d console sessions of the removed user left after the first step", left)
	}
	conformance.RemoveCompany(t, s, f.Company.ID, 1000)
}
