package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestReportBatchesTrimInOneOrder: two batches of reports of the same two
// companies, their changes in opposite orders, meet on the rows their
// activity trims delete: the first waits on the first company's oldest
// line (held by another transaction), the second has trimmed the second
// company's lines and waits behind it. Listed in their changes' order, the
// first would then wait for the second's lines while the second waits for
// its, and the database would break the deadlock; listed by company, both
// trim in one order and the database breaks none.
func TestReportBatchesTrimInOneOrder(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	ctx := context.Background()
	type job struct{ companyID, deviceID uint64 }
	var companies []uint64
	jobs := map[string]job{}
	for ci := range 2 {
		c, _ := conformance.Company(t, s)
		companies = append(companies, c.ID)
		for d := range 2 {
			fp := fmt.Sprintf("fp-%d-%d", ci, d)
			conformance.Device(t, s, c.ID, fp)
			m := store.Message{UUID: fmt.Sprintf("job-%d", d), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms",
				Phone: "+15550100000", Text: "hi", Segments: 1}
			got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			jobs[fmt.Sprintf("%d%d", ci, d)] = job{c.ID, got.DeviceID}
		}
		// A full feed, so that each batch's line trims the oldest.
		if _, err := s.pool.Exec(ctx, `INSERT INTO activity (company_id, rec) SELECT $1, '{}'::jsonb FROM generate_series(1, $2)`,
			int64(c.ID), store.ActivityKeep+10); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	sent := func(j job, uuid string) *report {
		return newReport(j.companyID, j.deviceID, uuid, store.MsgSent, "", "", "", now)
	}
	first := []*report{sent(jobs["00"], "job-0"), sent(jobs["10"], "job-0")}
	second := []*report{sent(jobs["11"], "job-1"), sent(jobs["01"], "job-1")}
	raceBehindLock(t, s, "SELECT 1 FROM activity WHERE company_id = $1 ORDER BY seq LIMIT 1 FOR UPDATE", companies[0],
		func() { s.applyReports(first) },
		func() { s.applyReports(second) })
	for i, r := range append(first, second...) {
		if m, moved, err := r.Wait(); err != nil || !moved || m.Status != store.MsgSent {
			t.Errorf("change %d: %s moved %v (%v), want sent", i, m.Status, moved, err)
		}
	}
	for _, c := range companies {
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM activity WHERE company_id = $1", int64(c)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < store.ActivityKeep || n > store.ActivityKeep+2 {
			t.Errorf("company %d keeps %d activity lines, want %d or a line or two more", c, n, store.ActivityKeep)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the batches, in %q", n, dl.sql)
	}
}
