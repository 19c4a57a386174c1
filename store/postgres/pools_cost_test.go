package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestStickySendCost counts a sticky pool's sends. A single send reads the
// pool, and the recipient's sticky entry or newest conversation, in the
// round trip of its other reads: 5 round trips to a new recipient (it
// locks a member in turn, then looks at it) and 4 to a known one, where
// they took 8 and 6 (the pool, the entry and the conversation each a
// round trip of their own). A bulk send reads every recipient's in one
// statement and writes their entries in one, so its statements do not
// grow with its recipients: a bulk to 1,000 new recipients cost three
// statements a message more than one to 100.
func TestStickySendCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	def := store.PoolInput{Name: "cost", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin}
	for i := range 3 {
		fp := fmt.Sprintf("cost-%d", i)
		conformance.Device(t, s, c.ID, fp)
		def.Members = append(def.Members, store.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
	}
	if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) { return def, nil }); err != nil {
		t.Fatal(err)
	}
	n := 0
	msg := func(to string) store.Message {
		n++
		return store.Message{UUID: fmt.Sprintf("cost-%d", n), CompanyID: c.ID, Pool: "cost", Channel: "sms", Phone: to, Text: "hi"}
	}
	clock := func() time.Time { return conformance.T0 }
	for _, tc := range []struct {
		name  string
		trips int64
	}{{"a new recipient", 5}, {"a known recipient", 4}} {
		m := msg("+15554000001")
		counted.trips.Store(0)
		if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, clock, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := counted.trips.Load(); got != tc.trips {
			t.Errorf("a send to %s took %d round trips, want %d", tc.name, got, tc.trips)
		}
	}
	bulk := func(size int) int64 {
		ms := make([]store.Message, size)
		for i := range ms {
			ms[i] = msg(fmt.Sprintf("+1555%d%06d", size, i))
		}
		counted.n.Store(0)
		if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, clock, nil, nil); err != nil {
			t.Fatal(err)
		}
		return counted.n.Load()
	}
	if small, large := bulk(100), bulk(1000); large != small {
		t.Errorf("a bulk to 100 new recipients took %d statements, to 1,000 %d: want as many", small, large)
	}
}

// TestPoolBulkReadsMembersAtOnce: a bulk send through a pool reads its
// members' SIMs (caps, counts, carrier-error streak) in a statement for all
// of them, once it holds them, so its round trips do not grow with the
// pool: a bulk of 60 through a round-robin pool of 30 takes as many as one
// through a pool of 3. Read as each member was looked at, they were two
// round trips a member, 54 more for the pool of 30. (Its writes, a count
// for each SIM it sends from, go in one round trip with the rest.)
func TestPoolBulkReadsMembersAtOnce(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	n := 0
	bulk := func(members int) int64 {
		name := fmt.Sprintf("of%d", members)
		def := store.PoolInput{Name: name, Strategy: store.PoolRoundRobin}
		for i := range members {
			fp := fmt.Sprintf("%s-%d", name, i)
			conformance.Device(t, s, c.ID, fp)
			def.Members = append(def.Members, store.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
		}
		if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) { return def, nil }); err != nil {
			t.Fatal(err)
		}
		ms := make([]store.Message, 60)
		for i := range ms {
			n++
			ms[i] = store.Message{UUID: fmt.Sprintf("of-%d", n), CompanyID: c.ID, Pool: name, Channel: "sms",
				Phone: fmt.Sprintf("+1555600%04d", n), Text: "hi"}
		}
		counted.trips.Store(0)
		out, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil || len(out) != len(ms) {
			t.Fatalf("bulk through %s: %d stored, %v", name, len(out), err)
		}
		return counted.trips.Load()
	}
	bulk(2) // the company's first bulk writes what a later one finds
	if small, large := bulk(3), bulk(30); large != small {
		t.Errorf("a bulk through a pool of 3 took %d round trips, through a pool of 30 %d: want as many", small, large)
	}
}

// TestStickyReadOfARecipient: what a sticky pool of 100 members reads of
// a recipient, in a company of 20,000 messages on those members: for one
// none of them talked to, a probe of conversations_phone (migration 0023)
// and no message; for one that 10 of them talked to, those devices'
// messages with it. Read device by device it probed every member's
// messages, some 200 pages of the index either way.
func TestStickyReadOfARecipient(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, priority, created_at, updated_at, rec)
			SELECT i, 1, i % 100 + 1, 'm-' || i, 'outbound', 'sms', '+1555' || lpad((i % 2000)::text, 7, '0'), 'sent', 0, now(), now(),
				jsonb_build_object('id', i, 'sim_slot', 'SIM1')
			FROM generate_series(1, 20000) i`,
		"VACUUM ANALYZE messages, conversations",
	} {
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	devs := make([]int64, 100)
	for i := range devs {
		devs[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		phone string
		pages float64
	}{{"+19990000000", 10}, {"+15550000042", 40}} {
		var raw []byte
		if err := s.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+lastTalkSQL("$1", "$2", "$3", "$4", "$5", "true"),
			int64(1), int64(1), devs, tc.phone, freshSince(time.Now())).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var plans []struct {
			Plan struct {
				Hit  float64 `json:"Shared Hit Blocks"`
				Read float64 `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("plan %s: %v", raw, err)
		}
		if pages := plans[0].Plan.Hit + plans[0].Plan.Read; pages > tc.pages {
			t.Errorf("the read of %s went through %v pages, want at most %v", tc.phone, pages, tc.pages)
		}
	}
}

// TestBulkPoolReadCountsNoTurns: the read of a pool for a bulk send
// (openPool) reads none of the members' turn rows, which only a single
// send's read counts (to write the rows of members that lack one before
// it picks without a lock): a bulk locks and reads the turns afterwards
// (newPicker), and the count was thrown away, 100 rows and index entries
// read for a pool of 100.
func TestBulkPoolReadCountsNoTurns(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c := poolOf100(t, s, store.PoolRoundRobin)
	read := func(one bool) int64 {
		t.Helper()
		var n int64
		err := s.write("test pool read", func(tx *txn) (err error) {
			n, err = tuplesRead(tx, "pool_member_turns", func() error {
				b := &pgx.Batch{}
				pr := queuePool(b, c.ID, "bench", "+15550001111", conformance.T0, one)
				if err := tx.sendBatch(b); err != nil {
					return err
				}
				if pr.gone {
					return fmt.Errorf("the pool is not read")
				}
				if one && pr.rows != 100 {
					return fmt.Errorf("a single send's read counts %d turn rows, want 100", pr.rows)
				}
				return nil
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	single, bulk := read(true), read(false)
	t.Logf("rows and index entries of pool_member_turns read by the pool's read: a single send's %d, a bulk's %d", single, bulk)
	if single < 100 {
		t.Errorf("a single send's read of the pool read %d rows and index entries of its turns, want at least its 100 members': the count does not see the reads", single)
	}
	if bulk != 0 {
		t.Errorf("a bulk send's read of the pool read %d rows and index entries of its turns, want none: it reads them after locking them", bulk)
	}
}
