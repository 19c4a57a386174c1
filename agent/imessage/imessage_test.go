package imessage

import (
	"context"
	"crypto/x509"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/agent/agenttest"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/testclock"
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
		`CREATE TABLE attachment (ROWID INTEGER PRIMARY KEY, guid TEXT, filename TEXT, mime_type TEXT, transfer_name TEXT, total_bytes INTEGER)`,
		`CREATE TABLE message_attachment_join (message_id INTEGER, attachment_id INTEGER)`,
		`INSERT INTO handle VALUES (1, '+15557654321', 'iMessage'), (2, 'Friend@Example.com', 'iMessage')`,
		`INSERT INTO chat VALUES (1, 'a', 45, 'E:me@icloud.com'), (2, 'b', 43, 'E:me@icloud.com'), (3, 'c', 45, 'P:+15550100002')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path, db
}

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
	s := &agenttest.Sink{Marks: map[string]string{}}
	if err := tr.poll(context.Background(), s); err != nil || len(s.Took) != 0 || s.Marks[markKey] != "1" {
		t.Fatalf("first poll: took %+v, mark %q, %v", s.Took, s.Marks[markKey], err)
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
	if len(s.Took) != 2 || s.Marks[markKey] != "7" {
		t.Fatalf("took %+v, mark %q", s.Took, s.Marks[markKey])
	}
	a, b := s.Took[0], s.Took[1]
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
	if err != nil || out.Status != proto.StatusSent || !out.AwaitDelivery || !strings.HasPrefix(out.Ref, strings.TrimSuffix(remembered, "}")+`,"sent_at":`) {
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

// recordingOsascript writes an osascript that records each call: its
// arguments, one a line, in dir/N.args, and the program file it was given
// in dir/N.script (the agent removes its own copy once osascript returned).
func recordingOsascript(t *testing.T) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(t.TempDir(), "osascript")
	body := "#!/bin/sh\nn=$(ls \"" + dir + "\" | wc -l)\ncp \"$1\" \"" + dir + "/$n.script\" 2>/dev/null\nprintf '%s\\n' \"$@\" > \"" + dir + "/$n.args\"\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// Recipients osascript could read as an option, or holding a control
// character or a quote, are refused before anything runs; a text that
// looks like an option or a statement reaches the script as data, after
// the program file, where osascript parses no options.
func TestSendKeepsUserDataOutOfOsascriptOptions(t *testing.T) {
	t.Parallel()
	path, _ := testDB(t)
	osascript, calls := recordingOsascript(t)
	tr, err := New(Config{ChatDB: path, Osascript: osascript, Handles: []string{"me@icloud.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"-e@example.com", "-ljavascript@x.co", " -e@example.com", "bob\n@example.com", "bob@example.com\r", "bob\x00@example.com", "\"bob\"@example.com", "-15557654321"} {
		out, err := tr.Execute(context.Background(), agent.Job{Send: proto.Send{ID: "bad", Channel: proto.ChannelIMessage, From: "me@icloud.com", To: to, Message: "hi"}})
		if err != nil || out.Status != proto.StatusFailed || out.Error != "invalid_job" {
			t.Errorf("recipient %q: got %+v %v, want failed invalid_job", to, out, err)
		}
	}
	if n, _ := os.ReadDir(calls); len(n) != 0 {
		t.Fatalf("osascript ran %d times for refused recipients", len(n)/2)
	}

	text := "-e do shell script \"id\"\n-l JavaScript"
	out, err := tr.Execute(context.Background(), agent.Job{Send: proto.Send{ID: "ok", Channel: proto.ChannelIMessage, From: "me@icloud.com", To: "Bob@Example.com", Message: text}})
	if err != nil || out.Status != proto.StatusSent {
		t.Fatalf("execute: %+v %v", out, err)
	}
	b, err := os.ReadFile(filepath.Join(calls, "0.args"))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := append([]string{args[0], "bob@example.com", "text"}, strings.Split(text, "\n")...)
	if !filepath.IsAbs(args[0]) || strings.HasPrefix(args[0], "-") || strings.Join(args, "\n") != strings.Join(want, "\n") {
		t.Fatalf("osascript argv: got %q, want the script file's absolute path, then the recipient, text and the text", args)
	}
	script, err := os.ReadFile(filepath.Join(calls, "0.script"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(script), "on run argv\n") || strings.Contains(string(script), "bob@") || strings.Contains(string(script), "shell") {
		t.Fatalf("the program file: got %q, want the fixed script without job data", script)
	}
	if _, err := os.Stat(args[0]); !os.IsNotExist(err) {
		t.Fatalf("the script file %s is left behind (%v)", args[0], err)
	}
}

// A send whose row never appears in chat.db (macOS 26's Messages can answer
// the AppleScript send with success and record nothing) is failed
// not_delivered_by_messages once RowTimeout has passed since osascript
// returned; a send whose row is there is awaited as before.
func TestSendWithoutRowFailsAfterRowTimeout(t *testing.T) {
	t.Parallel()
	path, db := testDB(t)
	osascript, _ := recordingOsascript(t)
	clock := testclock.New(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	tr, err := New(Config{ChatDB: path, Osascript: osascript, Handles: []string{"me@icloud.com"}, RowTimeout: 5 * time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	send := func(id, text string) string {
		t.Helper()
		out, err := tr.Execute(context.Background(), agent.Job{Send: proto.Send{ID: id, Channel: proto.ChannelIMessage, From: "me@icloud.com", To: "+15557654321", Message: text}})
		if err != nil || out.Status != proto.StatusSent || !out.AwaitDelivery {
			t.Fatalf("execute %s: %+v %v", id, out, err)
		}
		return out.Ref
	}
	lost, kept := send("lost", "never recorded"), send("kept", "recorded")
	if _, err := db.Exec(`INSERT INTO message (ROWID, guid, text, handle_id, is_from_me) VALUES (20, 'k', 'recorded', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5*time.Minute - time.Second)
	for _, ref := range []string{lost, kept} {
		if d, err := tr.Delivery(context.Background(), ref); err != nil || d.Final {
			t.Fatalf("before the row timeout: got %+v %v, want it still awaited", d, err)
		}
	}
	clock.Advance(time.Second)
	if d, err := tr.Delivery(context.Background(), lost); err != nil || !d.Final || d.Status != proto.StatusFailed || d.Error != "not_delivered_by_messages" {
		t.Fatalf("no row after the timeout: got %+v %v, want failed not_delivered_by_messages", d, err)
	}
	if d, err := tr.Delivery(context.Background(), kept); err != nil || d.Final {
		t.Fatalf("a recorded send after the timeout: got %+v %v, want it still awaited", d, err)
	}
	// A ref journaled by an older agent has no send time: awaited as before.
	if d, err := tr.Delivery(context.Background(), `{"after":0,"to":"+15557654321","text":"old"}`); err != nil || d.Final {
		t.Fatalf("a ref without sent_at: got %+v %v, want it still awaited", d, err)
	}
}

// A file whose caption Messages refused went out all the same: the job is
// sent, not failed (a failed job the server may retry, and the recipient
// would get the file twice).
func TestFileSentCaptionFailedIsSent(t *testing.T) {
	t.Parallel()
	path, _ := testDB(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\nfake"))
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	dir := t.TempDir()
	osascript := filepath.Join(dir, "osascript")
	// The file goes; the text is refused, as Messages does for a script error.
	body := "#!/bin/sh\nprintf '%s\\n' \"$3\" >> \"" + dir + "/kinds\"\n[ \"$3\" = file ] || { echo 'execution error: Messages got an error (-1708)' >&2; exit 1; }\n"
	if err := os.WriteFile(osascript, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{ChatDB: path, Osascript: osascript, Handles: []string{"me@icloud.com"},
		Media: agent.MediaFetcher{AllowPrivate: true, RootCAs: roots, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	job := agent.Job{Send: proto.Send{ID: "j", Channel: proto.ChannelIMessage, From: "me@icloud.com", To: "+15557654321",
		Message: "the label", ContentType: "image", MediaURL: srv.URL + "/label.png"}}
	out, err := tr.Execute(context.Background(), job)
	if err != nil || out.Status != proto.StatusSent || !out.AwaitDelivery {
		t.Fatalf("file sent, caption refused: got %+v %v, want sent", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "kinds")); string(b) != "file\ntext\n" {
		t.Fatalf("osascript sends: %q, want the file then the caption", b)
	}
	// Without a file the refused text is the job's failure, as before.
	job = agent.Job{Send: proto.Send{ID: "k", Channel: proto.ChannelIMessage, From: "me@icloud.com", To: "+15557654321", Message: "hi", ContentType: "text"}}
	if out, err := tr.Execute(context.Background(), job); err == nil {
		t.Fatalf("text refused: got %+v, want an error", out)
	}
}

// A send is found in chat.db by its recipient folded as the job's address
// is (normalize: Go's strings.ToLower), not by SQLite's lower(), which
// lowers ASCII letters only: a handle Messages wrote with a non-ASCII
// capital ("Émile@...") was never matched, and its send never proven. A
// handle that only looks alike (another letter) is still another handle.
func TestSentRowFoldsHandlesAsJobsAre(t *testing.T) {
	t.Parallel()
	path, db := testDB(t)
	osascript, _ := recordingOsascript(t)
	if _, err := db.Exec(`INSERT INTO handle VALUES (3, 'Émile@Example.com', 'iMessage'), (4, 'Émilé@example.com', 'iMessage'), (5, '` + "\u212A" + `ate@example.com', 'iMessage')`); err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{ChatDB: path, Osascript: osascript, Handles: []string{"me@icloud.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	send := func(to, text string) (agent.Job, string) {
		t.Helper()
		job := agent.Job{Send: proto.Send{ID: text, Channel: proto.ChannelIMessage, From: "me@icloud.com", To: to, Message: text}}
		out, err := tr.Execute(context.Background(), job)
		if err != nil || out.Status != proto.StatusSent || !out.AwaitDelivery {
			t.Fatalf("execute to %s: %+v %v", to, out, err)
		}
		job.Ref = out.Ref
		return job, out.Ref
	}
	emile, emileRef := send("ÉMILE@example.com", "bonjour")
	_, kateRef := send("Kate@example.com", "hi kate")
	_, friendRef := send("friend@example.com", "hi friend")
	// The same text to the look-alike handle first: not the send.
	if _, err := db.Exec(`INSERT INTO message (ROWID, guid, text, handle_id, is_from_me, is_delivered) VALUES (30, 'a', 'bonjour', 4, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if d, err := tr.Delivery(context.Background(), emileRef); err != nil || d.Final {
		t.Fatalf("a look-alike handle's row: got %+v %v, want the send still awaited", d, err)
	}
	if _, err := db.Exec(`INSERT INTO message (ROWID, guid, text, handle_id, is_from_me, is_delivered) VALUES (31, 'b', 'bonjour', 3, 1, 1), (32, 'c', 'hi kate', 5, 1, 1), (33, 'd', 'hi friend', 2, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	for name, ref := range map[string]string{"Émile@Example.com": emileRef, "the Kelvin sign's Kate": kateRef, "Friend@Example.com": friendRef} {
		if d, err := tr.Delivery(context.Background(), ref); err != nil || !d.Final || d.Status != proto.StatusDelivered {
			t.Errorf("the send to %s: got %+v %v, want delivered", name, d, err)
		}
	}
	if out, known := tr.Recover(context.Background(), emile); !known || out.Status != proto.StatusSent {
		t.Errorf("recover the send to Émile@Example.com: %+v %v", out, known)
	}
}

// iMessage keeps every key for ever (it is no agent.ClearedKeys): a message
// Messages writes again as a new row (synced from iCloud anew) sits above
// the mark with the GUID it had, so it is read again, under the same key,
// however old it is: only the journal's known key keeps it from being
// forwarded twice.
func TestRewrittenRowIsReadAgainUnderItsKey(t *testing.T) {
	t.Parallel()
	if _, ok := any(&Transport{}).(agent.ClearedKeys); ok {
		t.Fatal("the iMessage transport lets the journal forget cleared keys")
	}
	path, db := testDB(t)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := New(Config{ChatDB: path, Osascript: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &agenttest.Sink{Marks: map[string]string{markKey: "0"}}
	exec(`INSERT INTO message (ROWID, guid, text, handle_id, service) VALUES (1, 'g1', 'hello', 1, 'iMessage')`)
	exec(`INSERT INTO chat_message_join VALUES (1, 1)`)
	if err := tr.poll(context.Background(), s); err != nil || len(s.Took) != 1 || s.Took[0].Key != "im:g1" {
		t.Fatalf("first poll: took %+v, %v", s.Took, err)
	}
	// Messages deletes the row and writes it again from iCloud.
	exec(`DELETE FROM message WHERE ROWID = 1`)
	exec(`DELETE FROM chat_message_join WHERE message_id = 1`)
	exec(`INSERT INTO message (ROWID, guid, text, handle_id, service) VALUES (9, 'g1', 'hello', 1, 'iMessage')`)
	exec(`INSERT INTO chat_message_join VALUES (1, 9)`)
	if err := tr.poll(context.Background(), s); err != nil || len(s.Took) != 2 || s.Took[1].Key != "im:g1" {
		t.Fatalf("the rewritten row: took %+v, %v; want it read again as im:g1", s.Took, err)
	}
}
