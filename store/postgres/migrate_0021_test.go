package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// back0022 undoes migrations 0024 and 0023 on a database of the latest
// schema: the index of 0023 goes, as on a database of 0022.
var back0022 = append(slices.Clone(back0023),
	"DROP INDEX conversations_phone",
	"DELETE FROM schema_version WHERE version = 23",
)

// back0021 undoes migrations 0024 to 0022 on a database of the latest
// schema: their indexes go, as on a database of 0021.
var back0021 = append(slices.Clone(back0022),
	"DROP INDEX device_failures_company, mail_outbox_company, pairings_company, sim_caps_company, webhook_events_company, one_time_tokens_user",
	"DELETE FROM schema_version WHERE version = 22",
)

// back0020 undoes migrations 0024 to 0021 on a database of the latest
// schema: the conversations' row-level insert trigger of 0006 again, as on
// a database of 0020. Tests of the migrations before it step back through
// it.
var back0020 = append(slices.Clone(back0021),
	"DROP TRIGGER messages_conversation_insert ON messages",
	"DROP FUNCTION messages_conversations_added()",
	`CREATE TRIGGER messages_conversation_insert AFTER INSERT ON messages FOR EACH ROW
		WHEN (NEW.channel NOT IN ('whatsapp', 'imessage')) EXECUTE FUNCTION messages_conversation()`,
	"DELETE FROM schema_version WHERE version = 21",
)

// Migration 0021 (the conversations summed once per INSERT) on a database
// of 0020 with conversations: the rows stay as they were, and every way a
// message goes in (one statement of many rows, several statements in one
// transaction, COPY, a move to another device) leaves each conversation
// its SMS messages' count and highest id, as the row-level trigger did.
// A statement of 1,000 messages to one number writes its conversation's
// row once, where on 0020 it wrote it 1,000 times.
func TestMigration0021SumsConversationsOncePerStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, ms, conn := migrationDB(t)
	if len(ms) < 21 || ms[20].version != 21 || ms[20].name != "conversation_sums" {
		t.Fatalf("migration 0021 is not where this test reads it: %d migrations", len(ms))
	}
	if v, err := migrate(ctx, conn, ms[:20], false); err != nil || v != 20 {
		t.Fatalf("migrate to 0020: %d, %v", v, err)
	}
	at := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	// insert stores messages of company 1 in one statement, each
	// "id device phone channel".
	insert := func(q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, rows ...string) {
		t.Helper()
		var ids, devs []int64
		var phones, channels []string
		for _, r := range rows {
			var id, dev int64
			var phone, channel string
			if _, err := fmt.Sscan(r, &id, &dev, &phone, &channel); err != nil {
				t.Fatalf("%q: %v", r, err)
			}
			ids, devs, phones, channels = append(ids, id), append(devs, dev), append(phones, phone), append(channels, channel)
		}
		if _, err := q.Exec(ctx, `INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, created_at, updated_at, rec)
			SELECT m.id, 1, m.dev, 'u-' || m.id, 'outbound', m.channel, m.phone, 'queued', $5, $5, '{}'
			FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS m (id, dev, phone, channel)`, ids, devs, phones, channels, at); err != nil {
			t.Fatal(err)
		}
	}
	// conversations reads the conversations, each "device phone messages
	// last_id", and checks them against what the row-level trigger kept:
	// each SMS message counted once in its device's conversation with its
	// number, whose newest is the highest id.
	conversations := func(when string) []string {
		t.Helper()
		read := func(sql string) []string {
			rows, err := conn.Query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := read(`SELECT concat_ws(' ', device_id, phone, messages, last_id) FROM conversations WHERE company_id = 1 ORDER BY device_id, phone`)
		want := read(`SELECT concat_ws(' ', device_id, phone, count(*), max(id)) FROM messages
			WHERE company_id = 1 AND channel NOT IN ('whatsapp', 'imessage') GROUP BY device_id, phone ORDER BY device_id, phone COLLATE "C"`)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: conversations %q, want %q (the SMS messages' count and highest id of each)", when, got, want)
		}
		return got
	}
	// written is how many rows of conversations one statement of n
	// messages to one number (ids from first) inserts and updates, in a
	// transaction rolled back.
	written := func(first, n int64) int64 {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		// The counts are the connection's not yet reported, which may
		// hold earlier transactions': the statement's are the difference.
		count := func() int64 {
			var w int64
			if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_inserted('conversations'::regclass)
				+ pg_stat_get_xact_tuples_updated('conversations'::regclass)`).Scan(&w); err != nil {
				t.Fatal(err)
			}
			return w
		}
		var rows []string
		for i := range n {
			rows = append(rows, fmt.Sprintf("%d 3 +15550009999 sms", first+i))
		}
		w0 := count()
		insert(tx, rows...)
		w := count() - w0
		return w
	}

	insert(conn, "1 1 +15550001 sms", "2 1 +15550001 sms", "3 1 +15550001 whatsapp", "4 1 +15550002 sms", "5 2 +15550001 sms",
		"6 1 +15550003 imessage", "7 1 +15550001 mms")
	before := conversations("on 0020")
	if want := []string{"1 +15550001 3 7", "1 +15550002 1 4", "2 +15550001 1 5"}; !slices.Equal(before, want) {
		t.Fatalf("on 0020: %q, want %q", before, want)
	}
	if w := written(1000, 1000); w != 1000 {
		t.Fatalf("on 0020: 1,000 messages to one number wrote its conversation %d times, want 1,000 (a row trigger)", w)
	}

	if v, err := migrate(ctx, conn, ms[:21], false); err != nil || v != 21 {
		t.Fatalf("migrate 0020 to 0021: %d, %v", v, err)
	}
	if got := conversations("after 0021"); !slices.Equal(got, before) {
		t.Fatalf("after 0021: %q, want them as they were, %q", got, before)
	}
	if w := written(1000, 1000); w != 1 {
		t.Fatalf("after 0021: 1,000 messages to one number wrote its conversation %d times, want once", w)
	}

	// One statement, a conversation new and others known, an id below the
	// newest (it stays the newest), WhatsApp and iMessage left out.
	insert(conn, "20 1 +15550001 sms", "21 1 +15550004 sms", "6000 2 +15550001 sms", "22 1 +15550004 sms", "23 1 +15550001 whatsapp",
		"24 2 +15550005 imessage", "25 2 +15550001 sms")
	if got, want := conversations("one statement"), []string{"1 +15550001 4 20", "1 +15550002 1 4", "1 +15550004 2 22", "2 +15550001 3 6000"}; !slices.Equal(got, want) {
		t.Fatalf("one statement: %q, want %q", got, want)
	}
	// Several statements in one transaction: each counts its own.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert(tx, "30 1 +15550002 sms")
	insert(tx, "31 1 +15550002 sms", "32 1 +15550006 sms")
	insert(tx) // no rows: nothing counted
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := conversations("statements of one transaction"), []string{"1 +15550001 4 20", "1 +15550002 3 31", "1 +15550004 2 22", "1 +15550006 1 32", "2 +15550001 3 6000"}; !slices.Equal(got, want) {
		t.Fatalf("statements of one transaction: %q, want %q", got, want)
	}
	// COPY (a copy of another store loads messages so).
	copied := [][]any{}
	for i, r := range [][3]any{{int64(40), int64(2), "+15550001"}, {int64(41), int64(2), "+15550007"}, {int64(42), int64(2), "+15550007"}} {
		copied = append(copied, []any{r[0], int64(1), r[1], fmt.Sprint("c-", i), "inbound", "sms", r[2], "received", at, at, "{}"})
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"messages"},
		[]string{"id", "company_id", "device_id", "uuid", "direction", "channel", "phone", "status", "created_at", "updated_at", "rec"},
		pgx.CopyFromRows(copied)); err != nil {
		t.Fatal(err)
	}
	if got, want := conversations("COPY"), []string{"1 +15550001 4 20", "1 +15550002 3 31", "1 +15550004 2 22", "1 +15550006 1 32", "2 +15550001 4 6000", "2 +15550007 2 42"}; !slices.Equal(got, want) {
		t.Fatalf("COPY: %q, want %q", got, want)
	}
	// A message moved to another device (failover) leaves one
	// conversation for the other, as before.
	if _, err := conn.Exec(ctx, "UPDATE messages SET device_id = 2 WHERE id = 32"); err != nil {
		t.Fatal(err)
	}
	if got, want := conversations("a move"), []string{"1 +15550001 4 20", "1 +15550002 3 31", "1 +15550004 2 22", "2 +15550001 4 6000", "2 +15550006 1 32", "2 +15550007 2 42"}; !slices.Equal(got, want) {
		t.Fatalf("a move: %q, want %q", got, want)
	}
}
