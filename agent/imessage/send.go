package imessage

// Sending through Messages with osascript, and reading a send's delivery
// back from its row in chat.db.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// errNotDelivered is the failed report of a send Messages never recorded.
const errNotDelivered = "not_delivered_by_messages"

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
			if file == "" {
				return agent.Outcome{}, err
			}
			// The file went; its caption did not. A failed report would
			// let the server retry the job and the recipient get the
			// file twice, and a status has no partial outcome (an error
			// with sent is ignored, PROTOCOL.md 8.5): the job is sent,
			// as the file is, and the lost caption is logged.
			t.log.Error("imessage: the file was sent but its caption was not; the job is reported sent",
				"id", job.ID, "to", to, "err", err)
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
	handles, err := t.handleRows(ctx, r.To)
	if err != nil || len(handles) == 0 {
		return sentRow{}, false, err
	}
	in := strings.Repeat(",?", len(handles))[1:]
	args := append([]any{r.After}, handles...)
	rows, err := t.db.QueryContext(ctx, `SELECT m.ROWID, m.text, m.attributedBody, COALESCE(m.is_delivered, 0), COALESCE(m.date_delivered, 0), COALESCE(m.error, 0)
		FROM message m
		WHERE m.is_from_me = 1 AND m.ROWID > ? AND m.handle_id IN (`+in+`)
		ORDER BY m.ROWID LIMIT 50`, args...)
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

// handleRows are the ROWIDs of chat.db's handles that are to, an address
// as normalize writes it: lower-cased by Go's strings.ToLower. SQLite's
// lower() lowers ASCII letters only, so it cannot be the comparison (a
// handle with a non-ASCII capital, "Émile@example.com", would never match
// "émile@example.com" and its send never be proven): it only narrows the
// rows read to the handles that are to in ASCII, and every handle holding
// another character, which Go then folds as normalize does.
func (t *Transport) handleRows(ctx context.Context, to string) ([]any, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT ROWID, id FROM handle WHERE lower(id) = ? OR id GLOB '*[^ -~]*'`, to)
	if err != nil {
		return nil, fmt.Errorf("imessage: read chat.db: %w", err)
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		var rowid int64
		var id string
		if err := rows.Scan(&rowid, &id); err != nil {
			return nil, fmt.Errorf("imessage: read chat.db: %w", err)
		}
		if strings.ToLower(id) == to {
			out = append(out, rowid)
		}
	}
	return out, rows.Err()
}
