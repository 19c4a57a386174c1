package main

import (
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// The iMessage tests run the real agent binary with a fake osascript first
// on PATH (it records its arguments) and a chat.db the test creates with the
// tables and columns the transport reads. Nothing here reaches Messages or
// Apple: the test itself writes the rows Messages would write.

// chatDB creates a chat.db with Messages' tables (the columns the agent
// reads) and returns it open for writing.
func chatDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE handle (ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, id TEXT NOT NULL, country TEXT, service TEXT NOT NULL, uncanonicalized_id TEXT, person_centric_id TEXT)`,
		`CREATE TABLE chat (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, style INTEGER, state INTEGER, account_id TEXT, chat_identifier TEXT, service_name TEXT, account_login TEXT, display_name TEXT)`,
		`CREATE TABLE message (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, text TEXT, handle_id INTEGER DEFAULT 0, service TEXT, account TEXT, date INTEGER, date_read INTEGER, date_delivered INTEGER, is_delivered INTEGER DEFAULT 0, is_from_me INTEGER DEFAULT 0, is_sent INTEGER DEFAULT 0, is_read INTEGER DEFAULT 0, error INTEGER DEFAULT 0, item_type INTEGER DEFAULT 0, associated_message_type INTEGER DEFAULT 0, cache_has_attachments INTEGER DEFAULT 0, attributedBody BLOB)`,
		`CREATE TABLE chat_message_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE, message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE, message_date INTEGER DEFAULT 0, PRIMARY KEY (chat_id, message_id))`,
		`CREATE TABLE attachment (ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, guid TEXT UNIQUE NOT NULL, created_date INTEGER DEFAULT 0, filename TEXT, uti TEXT, mime_type TEXT, transfer_state INTEGER DEFAULT 0, is_outgoing INTEGER DEFAULT 0, transfer_name TEXT, total_bytes INTEGER DEFAULT 0)`,
		`CREATE TABLE message_attachment_join (message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE, attachment_id INTEGER REFERENCES attachment (ROWID) ON DELETE CASCADE, UNIQUE(message_id, attachment_id))`,
		`INSERT INTO handle (ROWID, id, service) VALUES (1, '+15557654321', 'iMessage')`,
		`INSERT INTO chat (ROWID, guid, style, chat_identifier, service_name, account_login) VALUES (1, 'iMessage;-;+15557654321', 45, '+15557654321', 'iMessage', 'E:me@icloud.com')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// appleNow is a chat.db date: nanoseconds since 2001-01-01.
func appleNow() int64 {
	return time.Since(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)).Nanoseconds()
}

// addMessage inserts a message row in chat 1 as Messages does.
func addMessage(t *testing.T, db *sql.DB, guid string, fromMe int, text any, body []byte) int64 {
	t.Helper()
	res, err := db.Exec(`INSERT INTO message (guid, text, handle_id, service, account, date, is_from_me, is_sent, attributedBody) VALUES (?, ?, 1, 'iMessage', 'e:me@icloud.com', ?, ?, ?, ?)`,
		guid, text, appleNow(), fromMe, fromMe, body)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if _, err := db.Exec(`INSERT INTO chat_message_join (chat_id, message_id, message_date) VALUES (1, ?, 0)`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// typedstream is an attributedBody as Messages archives it (an
// NSAttributedString in Apple's typedstream format) around text.
func typedstream(text string) []byte {
	b := []byte("\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85\x92\x84\x84\x84\x08NSString\x01\x94\x84\x01+")
	if len(text) < 0x80 {
		b = append(b, byte(len(text)))
	} else {
		b = append(b, 0x81, 0, 0)
		binary.LittleEndian.PutUint16(b[len(b)-2:], uint16(len(text)))
	}
	b = append(b, text...)
	return append(b, "\x86\x84\x02iI\x01\x05\x92\x84\x84\x84\x0cNSDictionary\x00\x94\x84\x01i\x01\x92\x86"...)
}

// fakeOsascript writes an osascript that records each call's arguments,
// one a line, in dir/calls/osascript.N.args, and a copy of the program file
// (its first argument) in osascript.N.script.
func fakeOsascript(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "calls"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, dir, "osascript", `f=$(mktemp "$FAKE_DIR/calls/osascript.XXXXXX")
cp "$1" "$f.script" 2>/dev/null
printf '%s\n' "$@" > "$f.tmp"
mv "$f.tmp" "$f.args"
`)
	return dir
}

func osascriptCalls(dir string) [][]string {
	files, _ := filepath.Glob(filepath.Join(dir, "calls", "*.args"))
	var out [][]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			out = append(out, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"))
		}
	}
	return out
}

// TestIMessageSendsAndReceives: a REST iMessage send reaches osascript
// with the recipient and the text as arguments of a fixed script, is
// reported sent and then delivered from chat.db; a received message whose
// text is only in attributedBody reaches the webhooks as imessage.received
// once; the conversations chat.db held before the first start are not
// forwarded.
func TestIMessageSendsAndReceives(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	hooks := newWebhookSink(t, srv)
	config := filepath.Join(t.TempDir(), "agent.json")
	srv.pair(agentBin, config, "mac-agent")
	fake := fakeOsascript(t)
	dbPath := filepath.Join(t.TempDir(), "chat.db")
	db := chatDB(t, dbPath)
	addMessage(t, db, "OLD-1", 0, "history, not news", nil)

	ag := startAgent(t, agentBin, fake, "--config", config, "--transport", "imessage", "--chat-db", dbPath,
		"--poll", "50ms", "--reconnect-max", "500ms", "--log-format", "json")
	var handleID string
	until(t, "the handle read from chat.db is listed online", func() bool {
		handleID = srv.agentID("imessage", "me@icloud.com")
		return handleID != ""
	})
	until(t, "the agent set its mark", func() bool {
		return strings.Contains(ag.stderr.String(), "received messages are forwarded from here on")
	})

	// A message whose text is only in attributedBody (macOS 13 and later).
	addMessage(t, db, "p:0/4D1B6B55-0001", 0, nil, typedstream("Hi from an iPhone ✓"))
	until(t, "the webhook gets imessage.received", func() bool { return hooks.hookCount("imessage.received", "Hi from an iPhone ✓") > 0 })

	// A send: osascript gets the fixed script as a program file, then the
	// recipient, the kind and the text as arguments of its run handler,
	// where osascript parses no options; a text that looks like
	// AppleScript or an option stays an argument.
	text := `-e "do shell script \"rm -rf ~\"" & quit`
	id := srv.agentSend("imessage", map[string]any{"handle_id": handleID, "to": "+15557654321", "content": text})
	until(t, "osascript is called", func() bool { return len(osascriptCalls(fake)) == 1 })
	args := osascriptCalls(fake)[0]
	if len(args) != 4 || !filepath.IsAbs(args[0]) || args[1] != "+15557654321" || args[2] != "text" || args[3] != text {
		t.Fatalf("osascript argv: got %q, want the program file's absolute path, the recipient, text and the text", args)
	}
	scripts, _ := filepath.Glob(filepath.Join(fake, "calls", "*.script"))
	if len(scripts) != 1 {
		t.Fatalf("program files given to osascript: %q, want 1", scripts)
	}
	if b, _ := os.ReadFile(scripts[0]); !strings.HasPrefix(string(b), "on run argv") || strings.Contains(string(b), "rm -rf") || strings.Contains(string(b), "15557654321") {
		t.Fatalf("the program file: got %q, want the fixed script without job data", b)
	}
	until(t, "the send is sent", func() bool { st, _ := srv.agentStatus("imessage", id); return st == "sent" })

	// Messages writes the sent row; once it is delivered, so is the send.
	row := addMessage(t, db, "SENT-1", 1, text, nil)
	if _, err := db.Exec(`UPDATE message SET is_delivered = 1, date_delivered = ? WHERE ROWID = ?`, appleNow(), row); err != nil {
		t.Fatal(err)
	}
	until(t, "the send is delivered", func() bool { st, _ := srv.agentStatus("imessage", id); return st == "delivered" })

	if n := hooks.hookCount("imessage.received", "Hi from an iPhone ✓"); n != 1 {
		t.Fatalf("webhook deliveries of the message: %d, want 1", n)
	}
	if n := hooks.hookCount("history, not news"); n != 0 {
		t.Fatalf("a message from before the first start was forwarded %d times", n)
	}
	if n := hooks.hookCount("rm -rf"); n != 0 {
		t.Fatalf("this Mac's own sent message was forwarded as received")
	}
}

// TestIMessageSendWithoutRowFails: when osascript answers success but
// Messages records no row for the send (macOS 26), the send is failed
// not_delivered_by_messages once --sent-row-timeout has passed, instead of
// staying sent.
func TestIMessageSendWithoutRowFails(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	config := filepath.Join(t.TempDir(), "agent.json")
	srv.pair(agentBin, config, "mac-agent")
	fake := fakeOsascript(t)
	dbPath := filepath.Join(t.TempDir(), "chat.db")
	chatDB(t, dbPath)

	startAgent(t, agentBin, fake, "--config", config, "--transport", "imessage", "--chat-db", dbPath,
		"--poll", "50ms", "--reconnect-max", "500ms", "--sent-row-timeout", "300ms")
	var handleID string
	until(t, "the handle read from chat.db is listed online", func() bool {
		handleID = srv.agentID("imessage", "me@icloud.com")
		return handleID != ""
	})
	id := srv.agentSend("imessage", map[string]any{"handle_id": handleID, "to": "+15557654321", "content": "lost by Messages"})
	until(t, "the send without a row is failed not_delivered_by_messages", func() bool {
		st, e := srv.agentStatus("imessage", id)
		return st == "failed" && e == "not_delivered_by_messages"
	})
	if n := len(osascriptCalls(fake)); n != 1 {
		t.Fatalf("osascript ran %d times, want 1", n)
	}
}
