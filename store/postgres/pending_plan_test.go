package postgres

import (
	"context"
	"testing"
	"time"
)

// A link's read of a long queue looks up the page's numbers on the
// company's opt-out list, a probe each, not the whole list of every
// company: device 1 of company 1 has 2,000 jobs queued, and the opt-out
// lists hold 20,000 numbers of company 2 and 10 of company 1. With the
// check beside the pick, the planner weighed it for the 2,000 jobs, not
// the page's 16, and hashed the whole list (a scan of its 20,000 rows) on
// every read. The statements are Pending's, under EXPLAIN ANALYZE.
func TestPendingReadsOneCompanysOptOuts(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	for _, sql := range []string{
		`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, priority, queue_place, created_at, updated_at, rec)
			SELECT i, 1, 1, 'q-' || i, 'outbound', 'sms', '+1555' || lpad(i::text, 7, '0'), 'queued', CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END, i, now(), now(),
				jsonb_build_object('id', i, 'text', 'a queued job')
			FROM generate_series(1, 2000) i`,
		`INSERT INTO opt_outs (company_id, phone, rec) SELECT 2, '+1666' || lpad(i::text, 7, '0'), '{}' FROM generate_series(1, 20000) i`,
		`INSERT INTO opt_outs (company_id, phone, rec) SELECT 1, '+1555' || lpad(i::text, 7, '0'), '{}' FROM generate_series(1, 10) i`,
		"VACUUM ANALYZE messages, opt_outs",
	} {
		if _, err := s.pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}
	for name, q := range map[string]struct {
		sql   string
		third any
	}{
		"priority": {priorityQueueSQL, time.Now()},
		"plain":    {plainQueueSQL, int64(0)},
	} {
		var scans int
		plan := explainedPlan(t, s, q.sql, int64(1), int64(1), q.third, 16)
		plan.walk(func(n planNode) {
			if n.NodeType == "Seq Scan" {
				scans++
			}
		})
		if scans > 0 || plan.ActualRows != 16 {
			t.Errorf("the %s queue's read: %v jobs, %d scans of a whole table; want 16 and none", name, plan.ActualRows, scans)
		}
	}
}
