package postgres

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// statsKey is a counter as the tests tally it: company, day, device, user.
type statsKey struct {
	company uint64
	day     uint32
	device  uint64
	user    uint64
}

// TestStatsSumsFollowTheCounters: counts written at once by many
// transactions (several counts each, over two companies, days, channels,
// devices and users), then counters removed and moved as a copy or a prune
// would: the company, device and user day sums the triggers keep equal the sums
// of the counters, a company's day stays within its 8 rows, and every
// question answers what was counted.
func TestStatsSumsFollowTheCounters(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	a, ua := conformance.Company(t, s)
	b, ub := conformance.Company(t, s)
	companies := []store.Company{a, b}
	users := map[uint64][]uint64{a.ID: {0, ua.ID, store.StatsNoUser}, b.ID: {0, ub.ID, store.StatsNoUser}}
	day0 := store.StatsDay(conformance.T0)
	var mu sync.Mutex
	want := map[statsKey]store.Counts{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 25 {
				type one struct {
					m  store.Message
					at time.Time
					c  store.Counts
				}
				var batch []one
				for range 1 + r.IntN(3) {
					c := companies[r.IntN(2)]
					m := store.Message{CompanyID: c.ID, DeviceID: uint64(1 + r.IntN(4)), UserID: users[c.ID][r.IntN(2)], Channel: []string{"sms", "whatsapp"}[r.IntN(2)], Direction: store.Outbound}
					if r.IntN(4) == 0 {
						m.Direction = store.Inbound
					}
					n := store.Counts{Sent: uint64(r.IntN(3)), Delivered: uint64(r.IntN(2)), Failed: uint64(r.IntN(2)), Received: uint64(r.IntN(2)), Expired: uint64(r.IntN(2)), Segments: uint64(r.IntN(5))}
					batch = append(batch, one{m, store.StatsDate(day0 + uint32(r.IntN(5))).Add(time.Hour), n})
				}
				if err := s.write("test", func(t *txn) error {
					for _, o := range batch {
						if err := count(t, o.m, o.at, o.c); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, o := range batch {
					k := statsKey{o.m.CompanyID, store.StatsDay(o.at), o.m.DeviceID, store.MessageUser(o.m)}
					c := want[k]
					c.Add(o.c)
					want[k] = c
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	checkStatsSums(t, s)

	// Counters removed (a day of company B) and moved (device 4 of A
	// counted as device 1), as an operator's repair would.
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "DELETE FROM stats_days WHERE company_id = $1 AND day = $2", id(b.ID), int32(day0+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE stats_days SET device_id = 1, shard = 8 + shard WHERE company_id = $1 AND device_id = 4", id(a.ID)); err != nil {
		t.Fatal(err)
	}
	for k, c := range maps.Clone(want) {
		switch {
		case k.company == b.ID && k.day == day0+1:
			delete(want, k)
		case k.company == a.ID && k.device == 4:
			delete(want, k)
			k.device = 1
			n := want[k]
			n.Add(c)
			want[k] = n
		}
	}
	checkStatsSums(t, s)

	tally := func(q store.StatsQuery) store.Stats {
		out := store.Stats{ByDevice: map[uint64]store.Counts{}, Days: make([]store.Counts, q.To-q.From+1)}
		for k, c := range want {
			if k.company != q.CompanyID || k.day < q.From || k.day > q.To || (q.Devices != nil && !q.Devices[k.device]) || (q.Users != nil && !q.Users[k.user]) {
				continue
			}
			out.Totals.Add(c)
			out.Days[k.day-q.From].Add(c)
			if !q.NoDevices {
				d := out.ByDevice[k.device]
				d.Add(c)
				out.ByDevice[k.device] = d
			}
		}
		return out
	}
	for name, q := range map[string]store.StatsQuery{
		"no filter":         {CompanyID: a.ID, From: day0 - 1, To: day0 + 5},
		"no devices":        {CompanyID: a.ID, From: day0 - 1, To: day0 + 5, NoDevices: true},
		"two days":          {CompanyID: b.ID, From: day0 + 1, To: day0 + 2},
		"devices":           {CompanyID: a.ID, From: day0, To: day0 + 4, Devices: map[uint64]bool{1: true, 3: true, 9: true}},
		"users":             {CompanyID: a.ID, From: day0, To: day0 + 4, Users: map[uint64]bool{0: true, store.StatsNoUser: true}},
		"users and devices": {CompanyID: b.ID, From: day0, To: day0 + 4, Users: map[uint64]bool{ub.ID: true}, Devices: map[uint64]bool{2: true}},
		"users, no devices": {CompanyID: b.ID, From: day0, To: day0 + 4, Users: map[uint64]bool{ub.ID: true}, NoDevices: true},
	} {
		got, err := s.Stats(q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := tally(q)
		if got.Totals != w.Totals || !maps.Equal(got.ByDevice, w.ByDevice) || fmt.Sprint(got.Days) != fmt.Sprint(w.Days) {
			t.Errorf("%s: got %+v, want %+v", name, got, w)
		}
		if got.RecordsRead == 0 {
			t.Errorf("%s: no rows read", name)
		}
	}
	if got, err := s.StatsTotals(b.ID + 1000); err != nil || !got.IsZero() {
		t.Errorf("a company with nothing counted: %+v (%v), want zeros", got, err)
	}
	for _, c := range companies {
		all := tally(store.StatsQuery{CompanyID: c.ID, From: day0, To: day0 + 4})
		if got, err := s.StatsTotals(c.ID); err != nil || got != all.Totals {
			t.Errorf("company %d: totals %+v (%v), want %+v", c.ID, got, err, all.Totals)
		}
		sum, err := s.DashboardSummary(c.ID, store.StatsDate(day0+1).Add(time.Hour), store.StatsDate(day0+3), 5)
		if err != nil || sum.Totals != all.Totals || sum.PeriodSegments != all.Days[1].Segments+all.Days[2].Segments {
			t.Errorf("company %d: summary %+v (%v), want totals %+v and the segments of days 2 and 3", c.ID, sum, err, all.Totals)
		}
	}
}

// checkStatsSums checks that the sums the trigger keeps equal those of the
// counters, and that a company's day lies in at most 8 rows.
func checkStatsSums(t *testing.T, s *Store) {
	t.Helper()
	for _, q := range []string{
		`SELECT count(*) FROM (
			(SELECT company_id, day, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_days GROUP BY company_id, day
			EXCEPT SELECT company_id, day, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_company_days GROUP BY company_id, day)
			UNION ALL
			(SELECT company_id, day, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_company_days GROUP BY company_id, day HAVING sum(sent) + sum(delivered) + sum(failed) + sum(received) + sum(expired) + sum(segments) > 0
			EXCEPT SELECT company_id, day, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_days GROUP BY company_id, day)) AS differ`,
		`SELECT count(*) FROM (
			(SELECT company_id, day, device_id, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_days GROUP BY company_id, day, device_id
			EXCEPT SELECT company_id, day, device_id, sent, delivered, failed, received, expired, segments FROM stats_device_days)
			UNION ALL
			(SELECT company_id, day, device_id, sent, delivered, failed, received, expired, segments FROM stats_device_days
				WHERE sent + delivered + failed + received + expired + segments > 0
			EXCEPT SELECT company_id, day, device_id, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_days GROUP BY company_id, day, device_id)) AS differ`,
		`SELECT count(*) FROM (
			(SELECT company_id, user_id, day, device_id, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_days GROUP BY company_id, user_id, day, device_id
			EXCEPT SELECT company_id, user_id, day, device_id, sent, delivered, failed, received, expired, segments FROM stats_user_days)
			UNION ALL
			(SELECT company_id, user_id, day, device_id, sent, delivered, failed, received, expired, segments FROM stats_user_days
				WHERE sent + delivered + failed + received + expired + segments > 0
			EXCEPT SELECT company_id, user_id, day, device_id, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
				FROM stats_days GROUP BY company_id, user_id, day, device_id)) AS differ`,
		`SELECT count(*) FROM (SELECT 1 FROM stats_company_days GROUP BY company_id, day HAVING count(*) > 8) AS crowded`,
	} {
		var n int
		if err := s.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d sums differ from the counters' (or crowd a day) by\n%s", n, q)
		}
	}
	var rows int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM stats_days").Scan(&rows); err != nil || rows == 0 {
		t.Fatalf("%d counters (%v): nothing to check the sums against", rows, err)
	}
}

// TestGenerationSeesLateCommits: a transaction that began before another
// and commits after it, after the generation was read, still moves the
// generation (the newest id's position alone would not), as does a
// rollback.
func TestGenerationSeesLateCommits(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	ctx := context.Background()
	write := func(n int) func() error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) }) //nolint:errcheck // after Commit it does nothing
		if _, err := tx.Exec(ctx, "INSERT INTO stats_days (company_id, day, channel, device_id, user_id, shard, sent) VALUES ($1, $2, 1, 1, 0, 0, 1)", id(c.ID), n); err != nil {
			t.Fatal(err)
		}
		return func() error { return tx.Commit(ctx) }
	}
	gen := func() uint64 {
		t.Helper()
		g, err := s.Generation()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	early := write(1)
	if err := write(2)(); err != nil { // a later transaction commits first
		t.Fatal(err)
	}
	g0 := gen()
	if err := early(); err != nil {
		t.Fatal(err)
	}
	g1 := gen()
	if g1 <= g0 {
		t.Fatalf("the early transaction's commit left the generation at %d, from %d", g1, g0)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO stats_days (company_id, day, channel, device_id, user_id, shard, sent) VALUES ($1, 3, 1, 1, 0, 0, 1)", id(c.ID)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if g2 := gen(); g2 <= g1 {
		t.Fatalf("a rollback left the generation at %d, from %d", g2, g1)
	}
	if v, err := s.Version(); err != nil || v == 0 {
		t.Fatalf("schema version %d (%v)", v, err)
	}
}
