package postgres

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store/conformance"
)

// A company's removal step reads each table through an index that leads
// with company_id, so a table the removal has emptied of the company costs
// the step an index probe, not a scan of every other company's rows. The
// statistics are taken while the company still has its rows, as on a
// server whose removal runs for hours: they say a scan meets the
// company's rows at once, and without removalPlans the planner chose one
// for each table, which read to the end of the table; without an index
// on company_id (five tables before migration 0022) it had nothing else.
// Each table's batch is run as the step runs it (its statement, after
// removalPlans, in one transaction), under EXPLAIN ANALYZE, and rolled
// back.
func TestRemovalStepsReadNoOtherCompany(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	ctx := context.Background()
	conformance.FillCompany(t, s)
	gone := conformance.FillCompany(t, s)
	if _, err := s.pool.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	conformance.RemoveCompany(t, s, gone.Company.ID, 100000)

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, companyTables)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 20 {
		t.Fatalf("the company tables: %v (%v)", tables, err)
	}
	if _, err := tx.Exec(ctx, removalPlans); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		var out []byte
		err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+deleteSomeSQL(pgx.Identifier{table}.Sanitize(), "company_id = $2"),
			1000, int64(gone.Company.ID)).Scan(&out)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("%s: the plan %s: %v", table, out, err)
		}
		var scans, passed int64
		plans[0].Plan.walk(func(n planNode) {
			if n.NodeType == "Seq Scan" {
				scans++
			}
			passed += n.RowsRemovedByFilter
		})
		if scans > 0 || passed > 0 {
			t.Errorf("a removal step's batch of %s: %d scans of the whole table, %d rows of another company read and passed over", table, scans, passed)
		}
	}
}

// planNode is a node of a plan that EXPLAIN (FORMAT JSON) gives.
type planNode struct {
	NodeType            string     `json:"Node Type"`
	RelationName        string     `json:"Relation Name"`
	RowsRemovedByFilter int64      `json:"Rows Removed by Filter"`
	ActualRows          float64    `json:"Actual Rows"`
	Plans               []planNode `json:"Plans"`
}

// walk calls fn with n and each node below it.
func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}
