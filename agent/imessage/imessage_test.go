package imessage

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// These tests read a chat.db the test creates; nothing reaches Messages.

func testDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chat.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE handle (ROWID INTEGER PRIMARY KEY, id TEXT NOT NULL, service TEXT)`,
		`CREATE TABLE chat (ROWID INTEGER PRIMARY KEY, guid TEXT, style INTEGER, account_login TEXT)`,
		`CREATE TABLE message (ROWID INTEGER PRIMARY KEY, guid TEXT, text TEXT, attributedBody BLOB, handle_id INTEGER, service TEXT, account TEXT, date INTEGER,
			is_from_me INTEGER DEFAULT 0, is_delivered INTEGER DEFAULT 0, date_delivered INTEGER DEFAULT 0, error INTEGER DEFAULT 0, item_type INTEGER DEFAULT 0, associated_message_type INTEGER DEFAULT 0)`,
		`CREATE TABLE chat_message_join (chat_id INTEGER, message_id INTEGER)`,
		`INSERT INTO handle VALUES (1, '+15557654321', 'iMessage'), (2, 'Friend@Example.com', 'iMessage')`,
		`INSERT INTO chat VALUES (1, 'a', 45, 'E:me@icloud.com'), (2, 'b', 43, 'E:me@icloud.com'), (3, 'c', 45, 'P:+15550100002')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path, db
}

type memSink struct {
	marks map[string]string
	took  []agent.Received
}

func (s *memSink) Take(msgs []agent.Received, k, v string) error {
	s.took = append(s.took, msgs...)
	if k != "" {
		s.marks[k] = v
	}
	return nil
}
func (s *memSink) Mark(k string) (string, error)        { return s.marks[k], nil }
func (s *memSink) Deliver(string, agent.Delivery) error { return nil }

func TestPollForwardsOnlyNewOneToOneIMessages(t *testing.T) {
	t.Parallel()
	path, db := testDB(t)
	add := func(rowid int, chat int, q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO chat_message_join VALUES (?, ?)`, chat, rowid); err != nil {
			t.Fatal(err)
		}
	}
	add(1, 1, `INSERT INTO message (ROWID, guid, text, handle_id, service) VALUES (1, 'g1', 'old', 1, 'iMessage')`)
	tr, err := New(Config{ChatDB: path, Osascript: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	inv, _ := tr.Inventory(context.Background())
	if len(inv.IMessage) != 2 || inv.IMessage[0].Handle != "me@icloud.com" || inv.IMessage[1].Handle != "+15550100002" {
		t.Fatalf("handles from chat.account_login: %+v", inv.IMessage)
	}
	s := &memSink{marks: map[string]string{}}
	if err := tr.poll(context.Background(), s); err != nil || len(s.took) != 0 || s.marks[markKey] != "1" {
		t.Fatalf("first poll: took %+v, mark %q, %v", s.took, s.marks[markKey], err)
	}
	add(2, 1, `INSERT INTO message (ROWID, guid, text, handle_id, service, date) VALUES (2, 'g2', NULL, 1, 'iMessage', 700000000000000000)`)
	if _, err := db.Exec(`UPDATE message SET attributedBody = ? WHERE ROWID = 2`, archived("from the body")); err != nil {
		t.Fatal(err)
	}
	add(3, 1, `INSERT INTO message (ROWID, guid, text, handle_id, service, is_from_me) VALUES (3, 'g3', 'mine', 1, 'iMessage', 1)`)
	add(4, 2, `INSERT INTO message (ROWID, guid, text, handle_id, service) VALUES (4, 'g4', 'group', 1, 'iMessage')`)
	add(5, 1, `INSERT INTO message (ROWID, guid, text, handle_id, service, associated_message_type) VALUES (5, 'g5', 'Loved “x”', 1, 'iMessage', 2000)`)
	add(6, 1, `INSERT INTO message (ROWID, guid, text, handle_id, service) VALUES (6, 'g6', 'relayed sms', 1, 'SMS')`)
	add(7, 3, `INSERT INTO message (ROWID, guid, text, handle_id, service) VALUES (7, 'g7', 'to the number', 2, 'iMessage')`)
	if err := tr.poll(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.took) != 2 || s.marks[markKey] != "7" {
		t.Fatalf("took %+v, mark %q", s.took, s.marks[markKey])
	}
	a, b := s.took[0], s.took[1]
	if a.Key != "im:g2" || a.Text != "from the body" || a.From != "+15557654321" || a.To != "me@icloud.com" || a.Channel != proto.ChannelIMessage || a.At.Year() != 2023 {
		t.Errorf("attributedBody message: %+v", a)
	}
	if b.Key != "im:g7" || b.From != "friend@example.com" || b.To != "+15550100002" {
		t.Errorf("message to the number: %+v", b)
	}
}

func TestDeliveryAndRecoveryFromChatDB(t *testing.T) {
	t.Parallel()
	path, db := testDB(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "osascript")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{ChatDB: path, Osascript: script, Handles: []string{"Me@iCloud.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	var remembered string
	job := agent.Job{Send: proto.Send{ID: "j1", Channel: proto.ChannelIMessage, From: "me@icloud.com", To: "+15557654321", Message: "hello"},
		Remember: func(ref string) error { remembered = ref; return nil }}
	out, err := tr.Execute(context.Background(), job)
	if err != nil || out.Status != proto.StatusSent || !out.AwaitDelivery || out.Ref != remembered {
		t.Fatalf("execute: %+v %v (remembered %q)", out, err, remembered)
	}
	job.Ref = remembered
	if _, known := tr.Recover(context.Background(), job); known {
		t.Fatal("recovered a send chat.db does not hold")
	}
	if d, _ := tr.Delivery(context.Background(), out.Ref); d.Final {
		t.Fatalf("final before Messages wrote the row: %+v", d)
	}
	// Another message to the same person first, then ours, failed.
	if _, err := db.Exec(`INSERT INTO message (ROWID, guid, text, handle_id, is_from_me, is_delivered) VALUES (10, 'x', 'other', 1, 1, 1), (11, 'y', 'hello', 1, 1, 0)`); err != nil {
		t.Fatal(err)
	}
	if out, known := tr.Recover(context.Background(), job); !known || out.Status != proto.StatusSent {
		t.Fatalf("recover: %+v %v", out, known)
	}
	if d, _ := tr.Delivery(context.Background(), out.Ref); d.Final {
		t.Fatalf("final while the row is neither delivered nor failed: %+v", d)
	}
	if _, err := db.Exec(`UPDATE message SET error = 22 WHERE ROWID = 11`); err != nil {
		t.Fatal(err)
	}
	if d, _ := tr.Delivery(context.Background(), out.Ref); !d.Final || d.Status != proto.StatusFailed {
		t.Fatalf("failed row: %+v", d)
	}
	// Another handle than this Mac's is refused.
	job.From = "other@icloud.com"
	if out, _ := tr.Execute(context.Background(), job); out.Error != "account_unavailable" {
		t.Fatalf("other handle: %+v", out)
	}
}
