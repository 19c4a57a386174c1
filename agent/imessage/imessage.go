// Package imessage is the agent's iMessage transport, for a Mac signed in
// to iMessage. It sends with the Messages app through osascript (AppleScript
// that takes the recipient and the text as arguments of its run handler,
// never spliced into the script), and reads Messages' own database,
// ~/Library/Messages/chat.db, read-only: received messages by polling for
// rows above a journaled mark, and the delivery of sent ones.
package imessage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	// The pure-Go SQLite driver: the agent is cross-compiled without cgo.
	_ "modernc.org/sqlite"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/phone"
)

// DefaultPoll is how often chat.db is read for new messages.
const DefaultPoll = 2 * time.Second

// DefaultRowTimeout is how long a send may go without its row in chat.db
// before it is failed not_delivered_by_messages. Messages writes the row of
// a send it took within seconds, before any delivery (a send it cannot
// deliver gets its row too, with an error); on macOS 26 the AppleScript
// send can answer success and write nothing, so without this bound such a
// send would stay sent for the agent's 72-hour wait. Ten minutes leaves a
// slow or just-launched Messages ample time while the sender learns the
// same hour.
const DefaultRowTimeout = 10 * time.Minute

// DefaultAttachmentWait is how long a received message waits for the
// files of its attachments: Messages writes the row before it has
// downloaded them, usually seconds before, longer for a big video on a
// slow network. Messages behind the waiting one wait too (the order is
// kept); past the wait the message goes without the missing files.
const DefaultAttachmentWait = 2 * time.Minute

// errNotDelivered is the failed report of a send Messages never recorded.
const errNotDelivered = "not_delivered_by_messages"

// maxRows is how many new rows one poll reads; the rest wait for the next.
const maxRows = 200

// markKey is the journal's key of the highest message ROWID read.
const markKey = "imessage-rowid"

// Config configures the transport.
type Config struct {
	// Handles are the iMessage addresses this Mac sends from (E.164 or
	// e-mail). Empty: the accounts chat.db's chat table names
	// (account_login).
	Handles []string
	// ChatDB is Messages' database; "" is ~/Library/Messages/chat.db.
	ChatDB string
	// Osascript is the program run to send; "" is osascript from PATH.
	Osascript string
	Poll      time.Duration
	// RowTimeout is how long a send may go without its row in chat.db
	// before it is failed not_delivered_by_messages (DefaultRowTimeout).
	RowTimeout time.Duration
	// AttachmentWait is how long a received message waits for its
	// attachments' files (DefaultAttachmentWait).
	AttachmentWait time.Duration
	Media          agent.MediaFetcher
	// MaxInboundMedia caps a received attachment the transport reads
	// (agent.DefaultInboundMediaBytes when 0): a bigger one is announced
	// with its size and no bytes, and the agent forwards the text alone.
	MaxInboundMedia int64
	Logger          *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Transport is the iMessage transport.
type Transport struct {
	cfg     Config
	log     *slog.Logger
	tool    agent.Tool
	db      *sql.DB
	handles []string
	waiting string // key of the message waiting for its attachments; Receive's goroutine only
}

// New returns the transport; it opens chat.db (lazily: nothing is read
// before Check).
func New(cfg Config) (*Transport, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.RowTimeout <= 0 {
		cfg.RowTimeout = DefaultRowTimeout
	}
	if cfg.AttachmentWait <= 0 {
		cfg.AttachmentWait = DefaultAttachmentWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxInboundMedia <= 0 {
		cfg.MaxInboundMedia = agent.DefaultInboundMediaBytes
	}
	if cfg.ChatDB == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("imessage: no home directory for chat.db: %w", err)
		}
		cfg.ChatDB = filepath.Join(home, "Library", "Messages", "chat.db")
	}
	if cfg.Osascript == "" {
		cfg.Osascript = "osascript"
	}
	var handles []string
	for _, h := range cfg.Handles {
		n, ok := normalize(h)
		if !ok {
			return nil, fmt.Errorf("imessage: handle %q: want an E.164 number such as +15550100002 or an e-mail address", h)
		}
		handles = append(handles, n)
	}
	// mode=ro: the agent never writes Messages' database. immutable stays
	// off: the file changes under the agent, and SQLite must see it.
	dsn := "file:" + (&url.URL{Path: cfg.ChatDB}).EscapedPath() + "?mode=ro&immutable=0&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("imessage: %s: %w", cfg.ChatDB, err)
	}
	db.SetMaxOpenConns(2)
	return &Transport{cfg: cfg, log: cfg.Logger, db: db, handles: handles,
		tool: agent.Tool{Name: cfg.Osascript,
			Install: "osascript is part of macOS: run the imessage transport on a Mac signed in to iMessage",
			Grant:   "Automation: allow the agent (or the terminal running it) to control Messages in System Settings > Privacy & Security > Automation"}}, nil
}

// Name is "imessage".
func (t *Transport) Name() string { return "imessage" }

// Check needs osascript, a readable chat.db (Full Disk Access) and at
// least one handle.
func (t *Transport) Check(ctx context.Context) error {
	if err := t.tool.Check(); err != nil {
		return err
	}
	if _, err := os.Stat(t.cfg.ChatDB); err != nil {
		return fmt.Errorf("imessage: %s: %w: sign in to iMessage in Messages, and give the agent Full Disk Access (System Settings > Privacy & Security > Full Disk Access)", t.cfg.ChatDB, err)
	}
	var max sql.NullInt64
	if err := t.db.QueryRowContext(ctx, `SELECT MAX(ROWID) FROM message`).Scan(&max); err != nil {
		return fmt.Errorf("imessage: cannot read %s (%v): give the agent Full Disk Access in System Settings > Privacy & Security > Full Disk Access", t.cfg.ChatDB, err)
	}
	if len(t.handles) == 0 {
		rows, err := t.db.QueryContext(ctx, `SELECT DISTINCT account_login FROM chat WHERE account_login IS NOT NULL`)
		if err != nil {
			return fmt.Errorf("imessage: read the accounts of %s: %w; name the handles with --handles", t.cfg.ChatDB, err)
		}
		defer rows.Close()
		for rows.Next() {
			var login string
			if rows.Scan(&login) == nil {
				if h, ok := normalize(stripAccount(login)); ok && !contains(t.handles, h) {
					t.handles = append(t.handles, h)
				}
			}
		}
		if len(t.handles) == 0 {
			return errors.New("imessage: chat.db names no iMessage account yet: name this Mac's handles with --handles me@icloud.com,+15550100002")
		}
		if len(t.handles) > 20 {
			t.handles = t.handles[:20]
		}
		t.log.Info("imessage: handles read from chat.db", "handles", strings.Join(t.handles, ","))
	}
	return nil
}

// Inventory announces the handles.
func (t *Transport) Inventory(ctx context.Context) (agent.Inventory, error) {
	inv := agent.Inventory{}
	for _, h := range t.handles {
		inv.IMessage = append(inv.IMessage, proto.IMessageHandle{Handle: h})
	}
	return inv, nil
}

// ref is what the journal keeps of a sent job, to find its row in chat.db:
// the highest ROWID before the send, the recipient and the text; once
// osascript returned, the time it did (Unix milliseconds), from which the
// row is awaited for at most RowTimeout.
type ref struct {
	After  int64  `json:"after"`
	To     string `json:"to"`
	Text   string `json:"text,omitempty"`
	SentAt int64  `json:"sent_at,omitempty"`
}

// Execute sends one job through Messages.
func (t *Transport) Execute(ctx context.Context, job agent.Job) (agent.Outcome, error) {
	failed := func(code string) (agent.Outcome, error) {
		return agent.Outcome{Status: proto.StatusFailed, Error: code}, nil
	}
	if from, _ := normalize(job.From); !contains(t.handles, from) {
		return failed("account_unavailable")
	}
	to, ok := normalize(job.To)
	if !ok {
		return failed("invalid_job")
	}
	var file string
	if job.ContentType != "" && job.ContentType != "text" {
		m, err := t.cfg.Media.Fetch(ctx, job.MediaURL)
		if err != nil {
			t.log.Warn("imessage: media not sent", "id", job.ID, "err", err)
			return failed("media_unavailable")
		}
		dir, err := os.MkdirTemp("", "simrelay-imessage-")
		if err != nil {
			return agent.Outcome{}, err
		}
		// Messages reads the file after osascript returned: it is left
		// for the system's temporary-file cleanup.
		file = filepath.Join(dir, filepath.Base(m.Name))
		if err := os.WriteFile(file, m.Data, 0o600); err != nil {
			return agent.Outcome{}, err
		}
	}
	var after sql.NullInt64
	if err := t.db.QueryRowContext(ctx, `SELECT MAX(ROWID) FROM message`).Scan(&after); err != nil {
		return agent.Outcome{}, fmt.Errorf("imessage: read chat.db: %w", err)
	}
	r := ref{After: after.Int64, To: to, Text: job.Message}
	if file != "" {
		r.Text = ""
	}
	b, _ := json.Marshal(r)
	if job.Remember != nil {
		if err := job.Remember(string(b)); err != nil {
			return agent.Outcome{}, err
		}
	}
	if file != "" {
		if err := t.send(ctx, to, "file", file); err != nil {
			return agent.Outcome{}, err
		}
	}
	if job.Message != "" || file == "" {
		if err := t.send(ctx, to, "text", job.Message); err != nil {
			return agent.Outcome{}, err
		}
	}
	r.SentAt = t.cfg.Now().UnixMilli()
	b, _ = json.Marshal(r)
	return agent.Outcome{Status: proto.StatusSent, Ref: string(b), AwaitDelivery: true}, nil
}

// sendScript is the AppleScript run by osascript. Its input comes only
// from argv: the recipient, "text" or "file", and the text or the file's
// path. Nothing is ever spliced into it.
const sendScript = `on run argv
set recipient to item 1 of argv
set kind to item 2 of argv
set payload to item 3 of argv
tell application "Messages"
set svc to 1st account whose service type = iMessage
set buddy to participant recipient of svc
if kind is "file" then
send (POSIX file payload) to buddy
else
send payload to buddy
end if
end tell
end run
`

// send runs sendScript with osascript as "osascript SCRIPTFILE recipient
// kind payload": the script is a private file whose absolute path is the
// first argument, and osascript reads every argument after the program
// file as an argument of its run handler, never as an option. So a
// recipient or a text that begins with "-" stays data (with "-e"
// statements, a first argument such as "-e..." would be a statement).
func (t *Transport) send(ctx context.Context, to, kind, payload string) error {
	f, err := os.CreateTemp("", "simrelay-send-*.applescript")
	if err != nil {
		return fmt.Errorf("imessage: write the send script: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(sendScript)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("imessage: write the send script: %w", err)
	}
	script, err := filepath.Abs(f.Name())
	if err != nil {
		return fmt.Errorf("imessage: write the send script: %w", err)
	}
	_, err = t.tool.Run(ctx, "", script, to, kind, payload)
	return err
}

// Recover finds an interrupted job's message in chat.db: if Messages has
// it, it went out.
func (t *Transport) Recover(ctx context.Context, job agent.Job) (agent.Outcome, bool) {
	if job.Ref == "" {
		return agent.Outcome{}, false
	}
	var r ref
	if json.Unmarshal([]byte(job.Ref), &r) != nil {
		return agent.Outcome{}, false
	}
	if _, found, err := t.sentRow(ctx, r); err != nil || !found {
		return agent.Outcome{}, false
	}
	return agent.Outcome{Status: proto.StatusSent, Ref: job.Ref, AwaitDelivery: true}, true
}

// Delivery reads the sent message's row: delivered once is_delivered is
// set, failed when Messages recorded an error.
func (t *Transport) Delivery(ctx context.Context, raw string) (agent.Delivery, error) {
	var r ref
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return agent.Delivery{Final: true, Status: proto.StatusFailed, Error: "generic_failure"}, nil
	}
	row, found, err := t.sentRow(ctx, r)
	if err != nil {
		return agent.Delivery{}, err
	}
	if !found {
		// A ref journaled before sent_at existed is awaited as before.
		if r.SentAt != 0 && t.cfg.Now().Sub(time.UnixMilli(r.SentAt)) >= t.cfg.RowTimeout {
			t.log.Warn("imessage: osascript answered success but Messages recorded no such message; reported failed",
				"to", r.To, "waited", t.cfg.RowTimeout.String(), "error", errNotDelivered)
			return agent.Delivery{Final: true, Status: proto.StatusFailed, Error: errNotDelivered}, nil
		}
		return agent.Delivery{}, nil
	}
	switch {
	case row.errCode != 0:
		t.log.Info("imessage: Messages could not deliver", "to", r.To, "error", row.errCode)
		return agent.Delivery{Final: true, Status: proto.StatusFailed, Error: "generic_failure"}, nil
	case row.delivered:
		return agent.Delivery{Final: true, Status: proto.StatusDelivered}, nil
	}
	return agent.Delivery{}, nil
}

type sentRow struct {
	rowid     int64
	delivered bool
	errCode   int64
}

// sentRow is the first message this Mac sent to r.To after r.After whose
// text is r.Text (any text for a file).
func (t *Transport) sentRow(ctx context.Context, r ref) (sentRow, bool, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT m.ROWID, m.text, m.attributedBody, COALESCE(m.is_delivered, 0), COALESCE(m.date_delivered, 0), COALESCE(m.error, 0)
		FROM message m JOIN handle h ON h.ROWID = m.handle_id
		WHERE m.is_from_me = 1 AND m.ROWID > ? AND lower(h.id) = ?
		ORDER BY m.ROWID LIMIT 50`, r.After, r.To)
	if err != nil {
		return sentRow{}, false, fmt.Errorf("imessage: read chat.db: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s sentRow
		var text sql.NullString
		var body []byte
		var isDelivered, dateDelivered int64
		if err := rows.Scan(&s.rowid, &text, &body, &isDelivered, &dateDelivered, &s.errCode); err != nil {
			return sentRow{}, false, err
		}
		got := text.String
		if !text.Valid {
			got, _ = attributedText(body)
		}
		if r.Text != "" && got != r.Text {
			continue
		}
		s.delivered = isDelivered != 0 || dateDelivered != 0
		return s, true, rows.Err()
	}
	return sentRow{}, false, rows.Err()
}

// Acknowledge has nothing to clear: chat.db is Messages', never written.
func (t *Transport) Acknowledge(ctx context.Context, msg agent.Received) error { return nil }

// Receive polls chat.db until ctx ends.
func (t *Transport) Receive(ctx context.Context, sink agent.Sink) error {
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		if err := t.poll(ctx, sink); err != nil && ctx.Err() == nil {
			t.log.Warn("imessage: reading chat.db failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// poll forwards the messages received since the mark. On the first start
// the mark is set to the newest row and nothing is forwarded: the history
// of the Mac's conversations is not news.
func (t *Transport) poll(ctx context.Context, sink agent.Sink) error {
	mark, err := sink.Mark(markKey)
	if err != nil {
		return err
	}
	if mark == "" {
		var max sql.NullInt64
		if err := t.db.QueryRowContext(ctx, `SELECT MAX(ROWID) FROM message`).Scan(&max); err != nil {
			return err
		}
		if err := sink.Take(nil, markKey, strconv.FormatInt(max.Int64, 10)); err != nil {
			return err
		}
		t.log.Info("imessage: first start; received messages are forwarded from here on", "after_rowid", max.Int64)
		return nil
	}
	after, err := strconv.ParseInt(mark, 10, 64)
	if err != nil {
		return fmt.Errorf("journal mark %q: %w", mark, err)
	}
	rows, err := t.db.QueryContext(ctx, `SELECT m.ROWID, COALESCE(m.guid, ''), m.text, m.attributedBody, COALESCE(m.date, 0),
			COALESCE(m.is_from_me, 0), COALESCE(h.id, ''), COALESCE(m.account, ''), COALESCE(m.service, ''),
			COALESCE(m.item_type, 0), COALESCE(m.associated_message_type, 0), COALESCE(c.account_login, ''), COALESCE(c.style, 0)
		FROM message m
		LEFT JOIN handle h ON h.ROWID = m.handle_id
		LEFT JOIN chat_message_join cmj ON cmj.message_id = m.ROWID
		LEFT JOIN chat c ON c.ROWID = cmj.chat_id
		WHERE m.ROWID > ? ORDER BY m.ROWID LIMIT ?`, after, maxRows)
	if err != nil {
		return err
	}
	defer rows.Close()
	var got []agent.Received
	var rowids []int64
	last := after
	for rows.Next() {
		var (
			rowid, date, fromMe, itemType, assoc, style int64
			guid, handle, account, service, login       string
			text                                        sql.NullString
			body                                        []byte
		)
		if err := rows.Scan(&rowid, &guid, &text, &body, &date, &fromMe, &handle, &account, &service, &itemType, &assoc, &login, &style); err != nil {
			return err
		}
		if rowid == last {
			continue // a message in two chats
		}
		last = rowid
		msg, ok := t.inbound(guid, text, body, date, fromMe, handle, account, service, itemType, assoc, login, style)
		if ok {
			got = append(got, msg)
			rowids = append(rowids, rowid)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	if last == after {
		return nil
	}
	for i := range got {
		files, pending, err := t.attachments(ctx, rowids[i], got[i].Key)
		if err != nil {
			return err
		}
		if pending && t.cfg.Now().Sub(got[i].At) < t.cfg.AttachmentWait {
			// Messages writes the row before it has downloaded the file:
			// take what came before and read this one again next poll.
			if t.waiting != got[i].Key {
				t.waiting = got[i].Key
				t.log.Info("imessage: waiting for Messages to download an attachment", "key", got[i].Key, "wait", t.cfg.AttachmentWait)
			}
			got, last = got[:i], rowids[i]-1
			break
		}
		if pending {
			t.log.Warn("imessage: an attachment's file never appeared; the message is forwarded without it", "key", got[i].Key, "wait", t.cfg.AttachmentWait)
		}
		got[i].Media = files
	}
	if last == after {
		return nil
	}
	return sink.Take(got, markKey, strconv.FormatInt(last, 10))
}

// attachments reads the files of a received message: chat.db's attachment
// rows of the message, each file from the path Messages stored it at (~
// is the home directory). One over MaxInboundMedia is announced with its
// size and not read; a missing file (Messages has not finished
// downloading it, or it was deleted) is logged and left out.
func (t *Transport) attachments(ctx context.Context, rowid int64, key string) (files []agent.File, pending bool, err error) {
	rows, err := t.db.QueryContext(ctx, `SELECT COALESCE(a.filename, ''), COALESCE(a.mime_type, ''), COALESCE(a.transfer_name, ''), COALESCE(a.total_bytes, 0)
		FROM message_attachment_join j JOIN attachment a ON a.ROWID = j.attachment_id
		WHERE j.message_id = ? ORDER BY a.ROWID`, rowid)
	if err != nil {
		return nil, false, err
	}
	type row struct {
		path, mime, name string
		size             int64
	}
	var list []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.path, &r.mime, &r.name, &r.size); err != nil {
			rows.Close()
			return nil, false, err
		}
		list = append(list, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	var out []agent.File
	for _, r := range list {
		f := agent.File{ContentType: r.mime, Filename: r.name, Size: r.size}
		if f.Filename == "" {
			f.Filename = filepath.Base(r.path)
		}
		path := r.path
		if rest, ok := strings.CutPrefix(path, "~/"); ok {
			home, err := os.UserHomeDir()
			if err != nil {
				t.log.Warn("imessage: no home directory for an attachment; the text is forwarded without it", "key", key, "err", err)
				continue
			}
			path = filepath.Join(home, rest)
		}
		st, err := os.Stat(path)
		if err == nil && st.Size() > f.Size {
			f.Size = st.Size()
		}
		if f.Size > t.cfg.MaxInboundMedia {
			out = append(out, f) // the agent logs it and forwards the text
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			pending = true // not downloaded yet, or deleted: the caller decides
			t.log.Debug("imessage: an attachment's file is not there", "key", key, "err", err)
			continue
		}
		if err != nil {
			t.log.Warn("imessage: an attachment's file cannot be read; the text is forwarded without it", "key", key, "err", err)
			continue
		}
		data, err := readAtMost(path, t.cfg.MaxInboundMedia)
		if err != nil {
			t.log.Warn("imessage: an attachment's file cannot be read; the text is forwarded without it", "key", key, "err", err)
			continue
		}
		f.Data, f.Size = data, int64(len(data))
		out = append(out, f)
	}
	return out, pending, nil
}

// readAtMost reads a file of at most max bytes (one that grew past it is
// an error: the agent never holds more than its cap).
func readAtMost(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes", path, max)
	}
	return data, nil
}

// groupStyle is chat.style of a group conversation (45 is one-to-one).
const groupStyle = 43

// inbound maps one chat.db row to a received message: iMessages others sent
// in one-to-one chats; not this Mac's own, not SMS relayed from an iPhone,
// not tapbacks or group events, not group chats.
func (t *Transport) inbound(guid string, text sql.NullString, body []byte, date, fromMe int64, handle, account, service string,
	itemType, assoc int64, login string, style int64) (agent.Received, bool) {
	if fromMe != 0 || itemType != 0 || assoc != 0 || style == groupStyle || guid == "" || handle == "" {
		return agent.Received{}, false
	}
	if service != "" && service != "iMessage" {
		return agent.Received{}, false
	}
	msg := text.String
	if !text.Valid || msg == "" {
		if s, ok := attributedText(body); ok {
			msg = s
		}
	}
	// Messages puts U+FFFC where each attachment sits in the text.
	if strings.Contains(msg, "\uFFFC") {
		msg = strings.TrimSpace(strings.ReplaceAll(msg, "\uFFFC", ""))
	}
	from, ok := normalize(handle)
	if !ok {
		from = handle
	}
	// The receiving handle: the chat's account, else the message's; a Mac
	// with one handle receives everything on it.
	to := ""
	for _, a := range []string{login, account} {
		if h, ok := normalize(stripAccount(a)); ok && contains(t.handles, h) {
			to = h
			break
		}
	}
	if to == "" {
		if len(t.handles) != 1 {
			t.log.Warn("imessage: a message for a handle not announced is not forwarded", "guid", guid, "account", login+account)
			return agent.Received{}, false
		}
		to = t.handles[0]
	}
	return agent.Received{Key: "im:" + guid, Channel: proto.ChannelIMessage, From: from, To: to, Text: msg, At: appleTime(date)}, true
}

// appleEpoch is the zero of chat.db's dates.
var appleEpoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// appleTime reads a chat.db date: nanoseconds since 2001 (macOS 10.13 and
// later) or seconds (before).
func appleTime(v int64) time.Time {
	if v <= 0 {
		return time.Now()
	}
	if v > 1e12 {
		return appleEpoch.Add(time.Duration(v))
	}
	return appleEpoch.Add(time.Duration(v) * time.Second)
}

// stripAccount drops chat.db's account prefix ("E:me@icloud.com",
// "p:+15550100002").
func stripAccount(a string) string {
	if len(a) > 2 && a[1] == ':' {
		switch a[0] {
		case 'E', 'e', 'P', 'p':
			return a[2:]
		}
	}
	return a
}

// normalize is PROTOCOL.md 16.1's form of a handle: an e-mail address in
// lower case, or E.164 without spaces, dashes, dots or brackets. As the
// server does, it refuses a control character anywhere, an address that
// begins with "-" (osascript could read it as an option), and the
// characters the server refuses in an address (space, double quote, angle
// brackets, separators).
func normalize(h string) (string, bool) {
	if phone.RecipientFault(h) != "" { // as the server refuses it
		return "", false
	}
	h = strings.TrimSpace(h)
	if at := strings.IndexByte(h, '@'); at >= 0 {
		if at == 0 || at == len(h)-1 || strings.Count(h, "@") != 1 || strings.ContainsAny(h, " \"<>,;") {
			return "", false
		}
		return strings.ToLower(h), true
	}
	h = strings.NewReplacer(" ", "", "-", "", ".", "", "(", "", ")", "").Replace(h)
	if len(h) < 8 || len(h) > 16 || h[0] != '+' || h[1] == '0' {
		return "", false
	}
	for _, r := range h[1:] {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	return h, true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
