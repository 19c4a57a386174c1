// Package imessage is the agent's iMessage transport, for a Mac signed in
// to iMessage. It sends with the Messages app through osascript (AppleScript
// that takes the recipient and the text as arguments of its run handler,
// never spliced into the script), and reads Messages' own database,
// ~/Library/Messages/chat.db, read-only: received messages by polling for
// rows above a journaled mark, and the delivery of sent ones.
package imessage

// The transport: its configuration and defaults, its set-up (chat.db opened
// read-only, osascript found, the handles read), and the form of a handle.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
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
