package postgres

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// quietCompany stores company 1's 30,000 messages, half of them inbound,
// and then nine companies' 10,000: company 1 is the quiet one, whose
// messages are all older than the others', and holds most of the table,
// so the planner counts on meeting its rows at every few of the table's.
func quietCompany(t *testing.T) *Store {
	t.Helper()
	s := openStore(t, Options{})
	for _, sql := range []string{
		`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, created_at, updated_at, rec)
			SELECT i, 1, 1, 'a-' || i, CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'sms', '+1555' || (i % 100), 'delivered', now(), now(),
				jsonb_build_object('id', i, 'text', 'an old message')
			FROM generate_series(1, 30000) i`,
		`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, created_at, updated_at, rec)
			SELECT i, 2 + i % 9, 2, 'b-' || i, CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'sms', '+1555' || (i % 100), 'delivered', now(), now(),
				jsonb_build_object('id', i, 'text', 'a newer message')
			FROM generate_series(30001, 40000) i`,
		"VACUUM ANALYZE messages",
	} {
		if _, err := s.pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// explainedPlan runs the statement under EXPLAIN ANALYZE and returns its
// plan.
func explainedPlan(t *testing.T, s *Store, sql string, args ...any) planNode {
	t.Helper()
	var out []byte
	if err := s.pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("the plan %s: %v", out, err)
	}
	return plans[0].Plan
}

// explained runs the statement under EXPLAIN ANALYZE and returns the rows
// it returned and the rows its scans read and passed over.
func explained(t *testing.T, s *Store, sql string, args ...any) (rows float64, passed int64) {
	t.Helper()
	plan := explainedPlan(t, s, sql, args...)
	plan.walk(func(n planNode) { passed += n.RowsRemovedByFilter })
	return plan.ActualRows, passed
}

// The inbound list of a quiet company reads that company's newest inbound
// messages, not every message stored since. Asked for company 1's newest
// 50, the planner took the table's primary key newest first, expecting
// company 1's inbound messages in every third row or so, and read the
// other companies' 10,000 to reach them. The statement is InboundList's.
func TestInboundListReadsOneCompany(t *testing.T) {
	t.Parallel()
	s := quietCompany(t)
	rows, passed := explained(t, s, inboundListSQL("", 2), int64(1), 50)
	if passed > 0 || rows != 50 {
		t.Errorf("company 1's inbound list: %v rows, %d rows of other companies read and passed over; want 50 and none", rows, passed)
	}
}

// The export of a quiet company reads that company's messages: its last
// page, after the company's newest message, read every message stored
// since (the planner took the primary key from the id after). The
// statement is CompanyMessagesAfter's.
func TestCompanyExportReadsOneCompany(t *testing.T) {
	t.Parallel()
	s := quietCompany(t)
	for _, after := range []int64{0, 29900, 30000} {
		rows, passed := explained(t, s, companyMessagesAfterSQL, int64(1), after, 1000, int64(store.ExportPageText))
		if want := float64(min(1000, 30000-after)); passed > 0 || rows != want {
			t.Errorf("company 1's export after %d: %v rows, %d rows of other companies read and passed over; want %v and none", after, rows, passed, want)
		}
	}
}
