package postgres

import (
	"context"
	"encoding/json"
	"testing"
)

// The inbound list of a company whose messages are older than the
// others' reads that company's newest inbound messages, not every message
// stored since: company 1 has 30,000 messages, half of them inbound, and
// nine companies the 10,000 after them. Asked for company 1's newest 50,
// the planner took the table's primary key newest first, expecting
// company 1's inbound messages in every third row or so, and read the
// other companies' 10,000 to reach them. The statement is InboundList's,
// under EXPLAIN ANALYZE.
func TestInboundListReadsOneCompany(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	ctx := context.Background()
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
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var out []byte
	if err := s.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+inboundListSQL("", 2), int64(1), 50).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("the plan %s: %v", out, err)
	}
	var passed int64
	plans[0].Plan.walk(func(n planNode) { passed += n.RowsRemovedByFilter })
	if passed > 0 {
		t.Errorf("company 1's inbound list read and passed over %d rows: %s", passed, out)
	}
	if plans[0].Plan.ActualRows != 50 {
		t.Errorf("company 1's inbound list: %v rows, want 50", plans[0].Plan.ActualRows)
	}
}
