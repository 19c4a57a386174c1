package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// pauseTracer counts the statements that begin with prefix and holds the
// first COMMIT of the connection that sent one until resume is closed: a
// prune (or a device's deletion) waits there with its first batch's rows
// locked.
type pauseTracer struct {
	prefix  string
	off     atomic.Bool // while set, it hears nothing
	deletes atomic.Int64
	mu      sync.Mutex
	deleter *pgx.Conn
	once    sync.Once
	paused  chan struct{}
	resume  chan struct{}
}

func newPauseTracer(prefix string) *pauseTracer {
	return &pauseTracer{prefix: prefix, paused: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pauseTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	p.saw(conn, d.SQL)
	p.mu.Lock()
	held := conn == p.deleter
	p.mu.Unlock()
	if held && strings.EqualFold(strings.TrimSpace(d.SQL), "commit") {
		p.once.Do(func() {
			close(p.paused)
			<-p.resume
		})
	}
	return ctx
}

func (p *pauseTracer) saw(conn *pgx.Conn, sql string) {
	if !p.off.Load() && strings.HasPrefix(sql, p.prefix) {
		p.deletes.Add(1)
		p.mu.Lock()
		p.deleter = conn
		p.mu.Unlock()
	}
}

func (p *pauseTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (p *pauseTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		p.saw(conn, q.SQL)
	}
	return ctx
}
func (p *pauseTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (p *pauseTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A prune of more rows than a batch deletes them all, a batch at a time,
// each its own transaction: a send that claims an expired key the first
// batch does not hold goes through while that batch is still open, where
// one transaction for the whole backlog held every row it deleted until
// its end.
func TestPruneBatchesDoNotHoldTheBacklog(t *testing.T) {
	t.Parallel()
	tr := newPauseTracer("DELETE FROM idempotency ")
	s := openStore(t, Options{Tracer: tr})
	s.pruneBatch = 3
	ctx := context.Background()
	const old = 10
	cutoff := conformance.T0
	for i := range old + 2 { // 10 expired, the oldest first, and 2 kept
		at := cutoff.Add(time.Duration(i-old) * time.Second)
		if i >= old {
			at = cutoff.Add(time.Duration(i) * time.Second)
		}
		if _, err := s.pool.Exec(ctx, "INSERT INTO idempotency (company_id, route, key, created_at) VALUES (1, 'send', $1, $2)",
			fmt.Sprint("k", i), at); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		n   int
		err error
	}
	pruned := make(chan result, 1)
	go func() {
		n, err := s.PruneIdempotency(cutoff)
		pruned <- result{n, err}
	}()
	select {
	case <-tr.paused:
	case r := <-pruned:
		t.Fatalf("the prune ended (%d, %v) without committing a batch", r.n, r.err)
	case <-time.After(time.Minute):
		t.Fatal("the prune did not reach its first commit in a minute")
	}
	// The first batch holds k0..k2 (the oldest); a send claiming k9,
	// expired too, takes it over at once.
	claimed := make(chan error, 1)
	go func() {
		claimed <- s.write("claim", func(t *txn) error {
			_, prior, err := priorAnswer(t, 1, store.IdempotencyKey{Route: "send", Key: "k9"}, cutoff.Add(time.Hour))
			if err == nil && prior != nil {
				err = fmt.Errorf("an expired key answered %+v", prior)
			}
			return err
		})
	}()
	err := answered(t, "the claim", func() error { return <-claimed })
	close(tr.resume)
	if err != nil {
		t.Errorf("a send claiming an expired key while the prune's first batch was open: %v", err)
	}
	r := <-pruned
	if r.err != nil || r.n != old-1 {
		t.Errorf("the prune: %d (%v), want %d (k9 was claimed again)", r.n, r.err, old-1)
	}
	if got := tr.deletes.Load(); got < 3 {
		t.Errorf("%d DELETE statements, want one a batch of 3 (4)", got)
	}
	var left []string
	rows, err := s.pool.Query(ctx, "SELECT key FROM idempotency ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(left, ",") != "k10,k11,k9" {
		t.Errorf("left after the prune: %v, want k10, k11 and k9", left)
	}
}

// Every prune deletes all it is due to when that is more rows than a
// batch, keeps what it is not, and counts what it dropped as one
// transaction did.
func TestEveryPruneTakesMoreThanABatch(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.pruneBatch = 2
	ctx := context.Background()
	c, u := conformance.Company(t, s)
	now := conformance.T0
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(table string) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var poolID int64
	if err := s.pool.QueryRow(ctx, "INSERT INTO pools (company_id, name_key, rec) VALUES ($1, 'p', '{}') RETURNING id", id(c.ID)).Scan(&poolID); err != nil {
		t.Fatal(err)
	}
	const due = 5 // two batches of 2 and one of 1
	before := func(i int) time.Time { return now.Add(-time.Duration(i+1) * time.Hour) }
	later := now.Add(time.Hour)
	for i := range due {
		exec("INSERT INTO agent_sends (company_id, number_id, sent_at, message_id) VALUES ($1, 1, $2, $3)", id(c.ID), before(i), i)
		exec("INSERT INTO billing_events (event_id, applied_at) VALUES ($1, $2)", fmt.Sprint("evt", i), before(i))
		exec("INSERT INTO pairings (hash, company_id, expires_at, rec) VALUES ($1, $2, $3, '{}')", []byte{byte(i)}, id(c.ID), before(i))
		exec("INSERT INTO pool_sticky (pool_id, phone, device_id, sim_slot, written_at) VALUES ($1, $2, 1, '1', $3)", poolID, fmt.Sprint("+1555000", i), before(i))
		exec("INSERT INTO idempotency (company_id, route, key, created_at) VALUES ($1, 'send', $2, $3)", id(c.ID), fmt.Sprint("k", i), before(i))
		exec("INSERT INTO sim_usage (device_id, sim_slot, kind, period, n) VALUES (1, '1', 'd', $1, 1)", dayStamp(now.AddDate(0, 0, -1-i)))
		exec("INSERT INTO sim_recipients (device_id, sim_slot, day, phone) VALUES (1, '1', $1, '+15550001')", dayStamp(now.AddDate(0, 0, -1-i)))
		exec("INSERT INTO token_families (family, user_id, revoked, rec) VALUES ($1, $2, false, '{}')", fmt.Sprint("empty", i), id(u.ID))
		exec("INSERT INTO console_sessions (hash, user_id, seen_at, expires_at, rec) VALUES ($1, $2, $3, $4, '{}')", []byte{byte(i)}, id(u.ID), before(i), later)
		for shard := range 3 {
			exec("INSERT INTO storage_usage (company_id, day, shard, used) VALUES ($1, $2, $3, 1)", id(c.ID), day(now)-int32(i+1), shard)
		}
		exec("INSERT INTO webhook_attempts (company_id, webhook_id, created_at, rec) VALUES ($1, 1, $2, '{}')", id(c.ID), before(due-i))
		exec("INSERT INTO mail_outbox (state, created_at, rec) VALUES ($1, $2, '{}')", store.MailSent, before(i))
		exec("INSERT INTO mail_outbox (id, state, created_at, rec) VALUES ($1, $2, $3, jsonb_build_object('id', $1::bigint, 'to', 'a@example.com'))",
			1000+i, store.MailFailed, before(i).AddDate(0, 0, -40))
	}
	exec("INSERT INTO token_families (family, user_id, revoked, rec) VALUES ('live', $1, false, '{}')", id(u.ID))
	for i := range due {
		exec("INSERT INTO refresh_tokens (hash, family, expires_at, rec) VALUES ($1, 'live', $2, '{}')", []byte{byte(i)}, before(i))
		exec("INSERT INTO one_time_tokens (hash, expires_at, rec) VALUES ($1, $2, '{}')", []byte{byte(i)}, before(i))
	}
	// What each keeps: one row of each table, and the second company's
	// webhook lines, of which the prune keeps the newest 2 of 5.
	exec("INSERT INTO agent_sends (company_id, number_id, sent_at, message_id) VALUES ($1, 1, $2, 99)", id(c.ID), later)
	exec("INSERT INTO billing_events (event_id, applied_at) VALUES ('kept', $1)", later)
	exec("INSERT INTO pairings (hash, company_id, expires_at, rec) VALUES ('kept', $1, $2, '{}')", id(c.ID), later)
	exec("INSERT INTO pool_sticky (pool_id, phone, device_id, sim_slot, written_at) VALUES ($1, 'kept', 1, '1', $2)", poolID, later)
	exec("INSERT INTO idempotency (company_id, route, key, created_at) VALUES ($1, 'send', 'kept', $2)", id(c.ID), later)
	exec("INSERT INTO sim_usage (device_id, sim_slot, kind, period, n) VALUES (1, '1', 'd', $1, 1)", dayStamp(now))
	exec("INSERT INTO sim_recipients (device_id, sim_slot, day, phone) VALUES (1, '1', $1, '+15550001')", dayStamp(now))
	exec("INSERT INTO refresh_tokens (hash, family, expires_at, rec) VALUES ('kept', 'live', $1, '{}')", later)
	exec("INSERT INTO one_time_tokens (hash, expires_at, rec) VALUES ('kept', $1, '{}')", later)
	exec("INSERT INTO console_sessions (hash, user_id, seen_at, expires_at, rec) VALUES ('kept', $1, $2, $2, '{}')", id(u.ID), later)
	exec("INSERT INTO storage_usage (company_id, day, shard, used) VALUES ($1, $2, 0, 1)", id(c.ID), day(now))
	exec("INSERT INTO webhook_attempts (company_id, webhook_id, created_at, rec) VALUES ($1, 1, $2, '{}')", id(c.ID), later)
	for range due {
		exec("INSERT INTO webhook_attempts (company_id, webhook_id, created_at, rec) VALUES ($1, 1, $2, '{}')", id(c.ID)+1, later)
	}
	exec("INSERT INTO mail_outbox (state, created_at, rec) VALUES ($1, $2, '{}')", store.MailPending, later)

	for _, p := range []struct {
		name   string
		prune  func() (int, error)
		want   int
		tables []string
		left   int
	}{
		{"PruneAgentSends", func() (int, error) { return s.PruneAgentSends(now) }, due, []string{"agent_sends"}, 1},
		{"PruneBillingEvents", func() (int, error) { return s.PruneBillingEvents(now) }, due, []string{"billing_events"}, 1},
		{"PrunePairings", func() (int, error) { return s.PrunePairings(now) }, due, []string{"pairings"}, 1},
		{"PruneSticky", func() (int, error) { return s.PruneSticky(now) }, due, []string{"pool_sticky"}, 1},
		{"PruneIdempotency", func() (int, error) { return s.PruneIdempotency(now) }, due, []string{"idempotency"}, 1},
		{"PruneSIMCounts", func() (int, error) { return s.PruneSIMCounts(now) }, 2 * due, []string{"sim_usage", "sim_recipients"}, 2},
		{"PruneTokens", func() (int, error) { return s.PruneTokens(now) }, 2 * due, []string{"refresh_tokens", "one_time_tokens"}, 2},
		{"PruneTokenFamilies", s.PruneTokenFamilies, due, []string{"token_families"}, 1},
		{"PruneConsoleSessions", func() (int, error) { return s.PruneConsoleSessions(now, now) }, due, []string{"console_sessions"}, 1},
		{"PruneStorageCounters", func() (int, error) { return s.PruneStorageCounters(now) }, due, []string{"storage_usage"}, 1},
		{"PruneWebhookAttempts", func() (int, error) { return s.PruneWebhookAttempts(now, 2) }, due + due - 2, []string{"webhook_attempts"}, 1 + 2},
	} {
		n, err := p.prune()
		if err != nil || n != p.want {
			t.Errorf("%s: %d (%v), want %d", p.name, n, err, p.want)
		}
		left := 0
		for _, table := range p.tables {
			left += count(table)
		}
		if left != p.left {
			t.Errorf("%s left %d rows in %v, want %d", p.name, left, p.tables, p.left)
		}
	}
	done, unsent, err := s.PruneMail(now, now.AddDate(0, 0, -30))
	if err != nil || done != due || len(unsent) != due {
		t.Errorf("PruneMail: %d done, %d unsent (%v); want %d and %d", done, len(unsent), err, due, due)
	}
	for i := 1; i < len(unsent); i++ {
		if unsent[i-1].ID >= unsent[i].ID || unsent[i].ID < 1000 || unsent[i].To != "a@example.com" {
			t.Errorf("PruneMail's unsent mails: %+v, want them oldest first, each with its address", unsent)
			break
		}
	}
	if n := count("mail_outbox"); n != 1 {
		t.Errorf("PruneMail left %d mails, want 1", n)
	}
}
