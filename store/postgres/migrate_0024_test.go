package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// functions0023 are the functions of the row trigger that moved a
// message's conversation until migration 0024, trigger0023 the trigger.
var functions0023 = []string{
	`CREATE FUNCTION conversation_add(company bigint, device bigint, num text, msg bigint) RETURNS void LANGUAGE sql AS $$
		INSERT INTO conversations AS c (company_id, device_id, phone, messages, last_id) VALUES (company, device, num, 1, msg)
		ON CONFLICT (company_id, device_id, phone) DO UPDATE SET messages = c.messages + 1, last_id = greatest(c.last_id, EXCLUDED.last_id)
	$$`,
	`CREATE FUNCTION conversation_remove(company bigint, device bigint, num text) RETURNS void LANGUAGE sql AS $$
		UPDATE conversations SET messages = messages - 1, last_id = coalesce((SELECT max(id) FROM messages
			WHERE company_id = company AND device_id = device AND phone = num AND channel NOT IN ('whatsapp', 'imessage')), 0)
		WHERE company_id = company AND device_id = device AND phone = num;
		DELETE FROM conversations WHERE company_id = company AND device_id = device AND phone = num AND messages <= 0;
	$$`,
	`CREATE FUNCTION messages_conversation() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF TG_OP = 'UPDATE' THEN
			PERFORM conversation_remove(OLD.company_id, OLD.device_id, OLD.phone);
		END IF;
		PERFORM conversation_add(NEW.company_id, NEW.device_id, NEW.phone, NEW.id);
		RETURN NULL;
	END
	$$`,
}

const trigger0023 = `CREATE TRIGGER messages_conversation_move AFTER UPDATE OF device_id ON messages FOR EACH ROW
	WHEN (NEW.channel NOT IN ('whatsapp', 'imessage') AND OLD.device_id <> NEW.device_id)
	EXECUTE FUNCTION messages_conversation()`

// back0023 undoes migration 0024 on a database of the latest schema: the
// row-level trigger of 0006 moves a message's conversation again, as on a
// database of 0023.
var back0023 = slices.Concat(
	[]string{"DROP TRIGGER messages_conversation_move ON messages", "DROP FUNCTION messages_conversation_unmoved()"},
	functions0023,
	[]string{trigger0023, "DELETE FROM schema_version WHERE version = 24"},
)

// Migration 0024 (a move's conversations written by the moving statement's
// round trip, not by a row trigger) on a database of 0023 with messages and
// conversations, some moved already by the trigger: the rows stay as they
// were, the trigger's functions are gone, a move that does not say it
// moves the conversations is refused, and moves made as moveJobs
// makes them leave the conversations exactly as the trigger leaves the
// same moves on a database of 0023 beside it (the newest looked for again
// when it moved, kept when it stayed; a conversation emptied removed; one
// joined summed; WhatsApp and iMessage, and a move to the same device,
// left out), each the messages' count and newest.
func TestMigration0024MovesConversationsAsTheTriggerDid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, ms, old := migrationDB(t) // stays on 0023: the row trigger
	_, _, conn := migrationDB(t) // upgraded to 0024
	if len(ms) < 24 || ms[23].version != 24 || ms[23].name != "conversation_moves" {
		t.Fatalf("migration 0024 is not where this test reads it: %d migrations", len(ms))
	}
	both := []*pgx.Conn{old, conn}
	for _, c := range both {
		if v, err := migrate(ctx, c, ms[:23], false); err != nil || v != 23 {
			t.Fatalf("migrate to 0023: %d, %v", v, err)
		}
	}
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	// Messages of companies 1 and 2, each "id company device phone channel".
	var stored []string
	for i := range 40 {
		stored = append(stored, fmt.Sprintf("%d 1 %d +1555000%d sms", 100+i, 1+i%3, i%7))
	}
	stored = append(stored, "200 1 1 +15550001 whatsapp", "201 1 1 +15550002 imessage", "202 1 2 +15550001 mms",
		"203 2 1 +15550001 sms", "204 2 1 +15550001 sms", "205 2 2 +15550001 sms")
	for _, c := range both {
		var ids, companies, devs []int64
		var phones, channels []string
		for _, r := range stored {
			var id, company, dev int64
			var phone, channel string
			if _, err := fmt.Sscan(r, &id, &company, &dev, &phone, &channel); err != nil {
				t.Fatalf("%q: %v", r, err)
			}
			ids, companies, devs = append(ids, id), append(companies, company), append(devs, dev)
			phones, channels = append(phones, phone), append(channels, channel)
		}
		if _, err := c.Exec(ctx, `INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, created_at, updated_at, rec)
			SELECT m.id, m.company, m.dev, 'u-' || m.id, 'outbound', m.channel, m.phone, 'queued', $6, $6, '{}'
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS m (id, company, dev, phone, channel)`,
			ids, companies, devs, phones, channels, at); err != nil {
			t.Fatal(err)
		}
	}
	// conversations reads c's conversations, each "company device phone
	// messages last_id", and checks them against the messages: each SMS
	// message counted once in its device's conversation with its number,
	// whose newest is the highest id.
	conversations := func(c *pgx.Conn, when string) []string {
		t.Helper()
		read := func(sql string) []string {
			rows, err := c.Query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := read(`SELECT concat_ws(' ', company_id, device_id, phone, messages, last_id) FROM conversations ORDER BY company_id, device_id, phone`)
		want := read(`SELECT concat_ws(' ', company_id, device_id, phone, count(*), max(id)) FROM messages
			WHERE channel NOT IN ('whatsapp', 'imessage') GROUP BY company_id, device_id, phone ORDER BY company_id, device_id, phone COLLATE "C"`)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: conversations %q, want %q (the SMS messages' count and highest id of each)", when, got, want)
		}
		return got
	}
	// move moves messages in one statement, each "id device": on the
	// database of 0023 by the UPDATE alone (the trigger), on the other as
	// moveJobs does, the UPDATE and the conversations' statements in one
	// round trip. Both end with the same conversations.
	move := func(when string, moves ...string) {
		t.Helper()
		var ids, devs []int64
		for _, r := range moves {
			var id, dev int64
			if _, err := fmt.Sscan(r, &id, &dev); err != nil {
				t.Fatalf("%q: %v", r, err)
			}
			ids, devs = append(ids, id), append(devs, dev)
		}
		const update = `UPDATE messages m SET device_id = u.device_id FROM unnest($1::bigint[], $2::bigint[]) AS u (id, device_id) WHERE m.id = u.id`
		if _, err := old.Exec(ctx, update, ids, devs); err != nil {
			t.Fatal(err)
		}
		var mv conversationMoves
		for i := range ids {
			m := store.Message{ID: uint64(ids[i])}
			var company, dev int64
			if err := conn.QueryRow(ctx, "SELECT company_id, device_id, phone, channel FROM messages WHERE id = $1", ids[i]).
				Scan(&company, &dev, &m.Phone, &m.Channel); err != nil {
				t.Fatal(err)
			}
			m.CompanyID, m.DeviceID = uint64(company), uint64(dev)
			mv.add(m, uint64(devs[i]))
		}
		b := &pgx.Batch{}
		mv.queueSay(b)
		b.Queue(update, ids, devs)
		mv.queue(b)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := conversations(conn, when+", after 0024"), conversations(old, when+", on 0023"); !slices.Equal(got, want) {
			t.Fatalf("%s: after 0024 %q, want as on 0023 %q", when, got, want)
		}
	}

	// Moved on both by the trigger, before the migration.
	for _, c := range both {
		if _, err := c.Exec(ctx, "UPDATE messages SET device_id = 3 WHERE id IN (100, 107, 203)"); err != nil {
			t.Fatal(err)
		}
	}
	before := conversations(conn, "on 0023")
	if v, err := migrate(ctx, conn, ms[:24], false); err != nil || v != 24 {
		t.Fatalf("migrate 0023 to 0024: %d, %v", v, err)
	}
	if got := conversations(conn, "after 0024"); !slices.Equal(got, before) {
		t.Fatalf("after 0024: %q, want them as they were, %q", got, before)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_proc WHERE proname IN ('messages_conversation', 'conversation_add', 'conversation_remove')`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("after 0024: %d of the trigger's functions left (%v), want none", left, err)
	}
	// The guard: a statement that moves an SMS message and not its
	// conversation fails, and moves nothing; one that writes the device
	// unchanged (a status change), or moves a WhatsApp message, passes.
	for _, sql := range []string{"UPDATE messages SET device_id = 3 WHERE id = 101", "UPDATE messages SET device_id = 3 WHERE id IN (110, 202)"} {
		if _, err := conn.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "without its conversation") {
			t.Fatalf("after 0024, %s: %v, want the move refused", sql, err)
		}
	}
	for _, sql := range []string{"UPDATE messages SET device_id = device_id, status = 'queued' WHERE company_id = 1",
		"UPDATE messages SET device_id = 3 WHERE id = 200", "UPDATE messages SET device_id = 1 WHERE id = 200"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("after 0024, %s: %v", sql, err)
		}
	}
	if got := conversations(conn, "after 0024, the moves refused"); !slices.Equal(got, before) {
		t.Fatalf("after 0024, the moves refused: %q, want them as they were, %q", got, before)
	}

	// A conversation's newest moved (135 of 100, 114 and 135 on device 3,
	// 127 of 106 and 127 on device 1), one not its newest (115 of 115 and
	// 136, 109 of 109 and 130), two of the conversations they join in one
	// statement.
	move("the newest moved, and not", "135 1", "115 1", "109 3", "127 3")
	// Every message of a conversation moved (it goes), to a device whose
	// conversation with the number has a newer message (it stays newest).
	move("a conversation emptied", "103 1", "110 1", "117 2", "124 2", "131 2", "138 1")
	// WhatsApp, iMessage and MMS; a move to the device the message is on;
	// another company's conversation with the same device and number.
	move("channels, a stay, another company", "200 2", "201 3", "202 1", "104 2", "203 2", "204 2", "205 1")
	// Back again, and to a device with no conversation yet.
	move("back", "135 2", "103 3", "110 4", "138 4")
}
