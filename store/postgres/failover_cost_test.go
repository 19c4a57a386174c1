package postgres

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestFailoverBatchStatements: a failover batch costs the same statements
// for 300 jobs as for 30, to members whose SIMs have a recipients cap: the
// jobs' places and rows are written for the whole batch, and whether each
// SIM sent to each recipient today is read once for the batch, not one
// statement (or three) a job. The moves come out as one by one: every job
// on a new member once, the recipients counted exactly.
func TestFailoverBatchStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	at := conformance.T0.Add(2 * time.Minute)
	costs := map[int]int64{}
	for _, n := range []int{30, 300} {
		from := conformance.Device(t, s, c.ID, fmt.Sprintf("fbs-%d", n))
		var fps []string
		for _, k := range []string{"a", "b"} {
			fp := fmt.Sprintf("fbs-%d-%s", n, k)
			fps = append(fps, fp)
			conformance.Device(t, s, c.ID, fp)
			if _, err := s.SetSIMCaps(c.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 10000}}, conformance.T0); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("fbs%d", n)
		only := []store.PoolMemberInput{{Device: from.Fingerprint, SIMSlot: "SIM1"}}
		p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: only}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ms := make([]store.Message, n)
		for i := range ms {
			// A third of the recipients twice.
			ms[i] = store.Message{UUID: fmt.Sprintf("fbs-%d-%d", n, i), CompanyID: c.ID, Pool: name, SIMSlot: "SIM1", Channel: "sms",
				Phone: fmt.Sprintf("+1555050%04d", i-i/3), Text: "hello"}
		}
		if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
		all := append(only, store.PoolMemberInput{Device: fps[0], SIMSlot: "SIM1"}, store.PoolMemberInput{Device: fps[1], SIMSlot: "SIM1"})
		if _, err := s.PutPool(c.ID, p.ID, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: all}, nil
		}); err != nil {
			t.Fatal(err)
		}
		n0 := stmts.n.Load()
		moved, _, err := s.Failover(store.FailoverInput{CompanyID: c.ID, DeviceID: from.ID, Reason: store.FailoverOffline,
			Pools: map[uint64]bool{p.ID: true}, Limit: 500}, nil, at)
		costs[n] = stmts.n.Load() - n0
		if err != nil || len(moved) != n {
			t.Fatalf("%d jobs: %d moved (%v)", n, len(moved), err)
		}
		sentTo := map[string]map[string]bool{}
		for _, m := range moved {
			if m.Device == from.Fingerprint || len(m.Attempts) != 1 {
				t.Fatalf("%d jobs: moved %s to %s with %d attempts", n, m.UUID, m.Device, len(m.Attempts))
			}
			if sentTo[m.Device] == nil {
				sentTo[m.Device] = map[string]bool{}
			}
			sentTo[m.Device][m.Phone] = true
		}
		for _, fp := range fps {
			us, err := s.SIMUsages(c.ID, fp, at)
			if err != nil || us[0].Recipients != int64(len(sentTo[fp])) {
				t.Errorf("%d jobs: %s's SIM1 counts %d recipients (%v), want the %d it took", n, fp, us[0].Recipients, err, len(sentTo[fp]))
			}
		}
	}
	t.Logf("a failover batch of 30 jobs to SIMs with a recipients cap, %d statements; of 300, %d", costs[30], costs[300])
	if costs[30] != costs[300] {
		t.Errorf("a failover batch of 30 jobs took %d statements, one of 300 %d: want the same", costs[30], costs[300])
	}
}

// TestFailoverWritesEachConversationOnce: a failover batch moves its jobs'
// conversations once per conversation, not once per job: 150 jobs to one
// number leave the moved device's conversation with it in one write (and
// its removal, the conversation emptied), and each conversation they join
// is written once, where the row trigger (before migration 0024) wrote
// the one they left 150 times. The conversations come out as every
// message's count and newest, on both sides.
func TestFailoverWritesEachConversationOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, Options{})
	s.SetPlans(benchPlans{})
	// Every write of a row of conversations, counted by key and kind.
	for _, sql := range []string{
		`CREATE TABLE conversation_writes (device_id bigint, phone text, op text, n int, PRIMARY KEY (device_id, phone, op))`,
		`CREATE FUNCTION count_conversation_write() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE r conversations;
		BEGIN
			IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
			INSERT INTO conversation_writes VALUES (r.device_id, r.phone, TG_OP, 1)
			ON CONFLICT (device_id, phone, op) DO UPDATE SET n = conversation_writes.n + 1;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER count_conversation_writes AFTER INSERT OR UPDATE OR DELETE ON conversations
			FOR EACH ROW EXECUTE FUNCTION count_conversation_write()`,
	} {
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := conformance.Company(t, s)
	from := conformance.Device(t, s, c.ID, "fwc-from")
	only := []store.PoolMemberInput{{Device: from.Fingerprint, SIMSlot: "SIM1"}}
	p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "fwc", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: only}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]store.Message, 300)
	for i := range ms {
		phone := "+15550600000" // half of them to one number, the rest each to its own
		if i%2 == 1 {
			phone = fmt.Sprintf("+1555061%04d", i)
		}
		ms[i] = store.Message{UUID: fmt.Sprintf("fwc-%d", i), CompanyID: c.ID, Pool: "fwc", SIMSlot: "SIM1", Channel: "sms", Phone: phone, Text: "hello"}
	}
	if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(only)
	for _, fp := range []string{"fwc-a", "fwc-b"} {
		conformance.Device(t, s, c.ID, fp)
		all = append(all, store.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
	}
	if _, err := s.PutPool(c.ID, p.ID, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "fwc", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: all}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "TRUNCATE conversation_writes"); err != nil {
		t.Fatal(err)
	}
	moved, _, err := s.Failover(store.FailoverInput{CompanyID: c.ID, DeviceID: from.ID, Reason: store.FailoverOffline,
		Pools: map[uint64]bool{p.ID: true}, Limit: 500}, nil, conformance.T0.Add(2*time.Minute))
	if err != nil || len(moved) != len(ms) {
		t.Fatalf("failover: %d of %d moved (%v)", len(moved), len(ms), err)
	}
	rows, err := s.pool.Query(ctx, `SELECT concat_ws(' ', device_id, phone, op, n) FROM conversation_writes WHERE n > 1 ORDER BY n DESC, device_id, phone, op`)
	if err != nil {
		t.Fatal(err)
	}
	again, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var writes int
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0) FROM conversation_writes").Scan(&writes); err != nil {
		t.Fatal(err)
	}
	t.Logf("a failover batch of %d jobs (half to one number) wrote %d rows of conversations", len(ms), writes)
	if len(again) > 0 {
		t.Errorf("a conversation's row written more than once in one way by one batch (device, number, write, times): %q", again[:min(len(again), 5)])
	}
	// The conversations are the messages' count and newest, each.
	read := func(sql string) []string {
		t.Helper()
		rows, err := s.pool.Query(ctx, sql, id(c.ID))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := read(`SELECT concat_ws(' ', device_id, phone, messages, last_id) FROM conversations WHERE company_id = $1 ORDER BY device_id, phone`)
	want := read(`SELECT concat_ws(' ', device_id, phone, count(*), max(id)) FROM messages
		WHERE company_id = $1 AND channel NOT IN ('whatsapp', 'imessage') GROUP BY device_id, phone ORDER BY device_id, phone COLLATE "C"`)
	if !slices.Equal(got, want) {
		t.Errorf("conversations after the failover:\n%q\nwant the messages' count and newest of each:\n%q", got, want)
	}
}

// TestMeasureFailoverConversations measures what moving a failover batch's
// conversations costs: 5,000 jobs queued through a pool on one device, each
// to its own recipient, the first 256 moved to four other devices in one
// UPDATE, in a transaction rolled back, as the trigger of migrations 0006
// to 0023 moved them (put back in the transaction) and as moveJobs moves
// them now (the UPDATE and the conversations' statements in one round
// trip), the two alternated, 15 rounds each, and the UPDATE alone. A
// measurement, not a test of speed: it asserts only that both leave the
// same conversations.
//
//	SIMRELAY_MEASURE=1 SIMRELAY_TEST_STORE=postgres go test ./store/postgres -run TestMeasureFailoverConversations -v
func TestMeasureFailoverConversations(t *testing.T) {
	if os.Getenv("SIMRELAY_MEASURE") == "" {
		t.Skip("a measurement: SIMRELAY_MEASURE=1 runs it")
	}
	ctx := t.Context()
	url := migrated(t)
	s := openURL(t, url, Options{})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	from := conformance.Device(t, s, c.ID, "mfc-from")
	var to []int64
	for k := range 4 {
		to = append(to, int64(conformance.Device(t, s, c.ID, fmt.Sprintf("mfc-%d", k)).ID))
	}
	if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "mfc", Strategy: store.PoolRoundRobin, Members: []store.PoolMemberInput{{Device: from.Fingerprint, SIMSlot: "SIM1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for k := range 5 {
		ms := make([]store.Message, 1000)
		for i := range ms {
			ms[i] = store.Message{UUID: fmt.Sprintf("mfc-%d-%d", k, i), CompanyID: c.ID, Pool: "mfc", SIMSlot: "SIM1", Channel: "sms",
				Phone: fmt.Sprintf("+1555%07d", k*1000+i), Text: "hello"}
		}
		if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) messages, conversations"); err != nil {
		t.Fatal(err)
	}
	// The batch: the first 256 jobs in queue order, dealt to the four.
	var mv conversationMoves
	var ids, devs []int64
	rows, err := conn.Query(ctx, `SELECT id, phone FROM messages WHERE company_id = $1 AND device_id = $2 ORDER BY queue_place LIMIT 256`, id(c.ID), id(from.ID))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var i int64
		var phone string
		if err := rows.Scan(&i, &phone); err != nil {
			t.Fatal(err)
		}
		dev := to[len(ids)%len(to)]
		ids, devs = append(ids, i), append(devs, dev)
		mv.add(store.Message{ID: uint64(i), CompanyID: c.ID, DeviceID: from.ID, Channel: "sms", Phone: phone}, uint64(dev))
	}
	if rows.Err() != nil || len(ids) != 256 {
		t.Fatalf("%d jobs read (%v)", len(ids), rows.Err())
	}
	// The trigger's functions, for good: each transaction puts back only
	// the trigger, so the session keeps what it compiled of them, as a
	// node's connection does.
	for _, sql := range functions0023 {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	const update = `UPDATE messages m SET device_id = u.device_id, updated_at = now() FROM unnest($1::bigint[], $2::bigint[]) AS u (id, device_id) WHERE m.id = u.id`
	// run moves the batch in a transaction rolled back, the trigger of 0023
	// put back first (trigger: a failover batch is a transaction of its own,
	// and the functions' statements are planned again in each), the conversations' statements after the
	// UPDATE (statements) or neither, and returns how long the move took and
	// the conversations it left.
	run := func(trigger, statements bool) (time.Duration, string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		b := &pgx.Batch{}
		if trigger {
			// The guard of 0024 gives way to the trigger of 0023.
			for _, sql := range []string{"DROP TRIGGER messages_conversation_move ON messages", trigger0023} {
				if _, err := tx.Exec(ctx, sql); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			mv.queueSay(b) // the guard lets the UPDATE alone pass too
		}
		b.Queue(update, ids, devs)
		if statements {
			mv.queue(b)
		}
		start := time.Now()
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		var sum string
		if err := tx.QueryRow(ctx, `SELECT md5(string_agg(concat_ws(' ', device_id, phone, messages, last_id), ',' ORDER BY device_id, phone))
			FROM conversations WHERE company_id = $1`, id(c.ID)).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		return took, sum
	}
	run(true, false) // the first of each warms the caches and plans
	run(false, true)
	var byTrigger, byStatements, alone []time.Duration
	for range 15 {
		d1, s1 := run(true, false)
		d2, s2 := run(false, true)
		d3, _ := run(false, false)
		if s1 != s2 {
			t.Fatalf("the trigger and the statements left different conversations")
		}
		byTrigger, byStatements, alone = append(byTrigger, d1), append(byStatements, d2), append(alone, d3)
	}
	span := func(ds []time.Duration) string {
		slices.Sort(ds)
		r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
		return fmt.Sprintf("median %v (%v to %v)", r(ds[len(ds)/2]), r(ds[0]), r(ds[len(ds)-1]))
	}
	t.Logf("a batch of 256 jobs moved, conversations by the row trigger: %s; by the statements: %s; the UPDATE alone, no conversation moved: %s",
		span(byTrigger), span(byStatements), span(alone))
}
