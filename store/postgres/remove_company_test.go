package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store/conformance"
)

// unfilled are the tables a company of every kind (conformance.FillCompany)
// writes nothing to: the schema's own and the cluster's, and records no
// store method writes for one company in a fixture (a provider's event
// ids; a device's failures and SIM streak come from reports of failure,
// its link from a node's hub, a pool's sticky entries from sends through
// it, a storage counter from a budget, login and rate windows from
// requests, a stream lease from the console's live view).
var unfilled = []string{"schema_version", "meta", "secrets", "billing_events", "cluster_nodes", "device_links",
	"device_failures", "sim_streaks", "pool_sticky", "storage_usage", "login_windows", "rate_windows", "stream_leases"}

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
		filled := dumpTables(t, s)
		for table, rows := range filled {
			grew := false
			for r, k := range rows {
				if before[table][r] != k {
					grew = true
				}
			}
			if !grew && !slices.Contains(unfilled, table) {
				t.Errorf("the fixture wrote nothing to table %s", table)
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
		ctx := context.Background()
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
