package imessage

// Receiving: chat.db polled for rows above the journaled mark, each row mapped
// to a received message with its attachments' files (waited for up to
// AttachmentWait).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// maxRows is how many new rows one poll reads; the rest wait for the next.
const maxRows = 200

// markKey is the journal's key of the highest message ROWID read.
const markKey = "imessage-rowid"

// Acknowledge has nothing to clear: chat.db is Messages', never written.
//
// The transport has no ClearedKeyRetention (agent.ClearedKeys): the
// journal keeps every message's key ("im:" and its GUID) for ever. chat.db
// is read above the mark, but Messages in iCloud writes a message it
// downloads again (the Mac signed in to iCloud again, a chat's history
// synced anew) as a new row, with a new ROWID above the mark and the GUID
// it had: only its known key keeps it from being forwarded a second time,
// however old it is.
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
