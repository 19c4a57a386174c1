// Package termux is the agent's transport for an Android phone running
// Termux with the Termux:API app: termux-sms-send sends (text on stdin,
// never through a shell), termux-telephony-deviceinfo tells the SIM and
// the network, termux-battery-status the battery, termux-sms-list polls the
// inbox and, after a crash, the sent box.
//
// Android gives Termux no delivery report and no sent result: a job is
// reported "sent" once Android took it from termux-sms-send, never
// "delivered".
package termux

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // Android's zone names, which Termux has no zoneinfo files for

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// Defaults of Config.
const (
	// DefaultPoll is how often the inbox is read: a received SMS reaches
	// the server within a few seconds, and a termux-sms-list call costs
	// the phone little.
	DefaultPoll = 5 * time.Second
	// DefaultPageSize is how many messages one termux-sms-list call reads
	// (its own default is 10; the agent pages back with -o until a page
	// holds nothing above the mark).
	DefaultPageSize = 50
	// maxPages bounds one poll's walk back through the inbox.
	maxPages = 20
	// markKey is the journal's high-water mark of the inbox (provider _id).
	markKey = "termux.inbox.last_id"
	// queryTimeout bounds a tool that only reads (the inbox, the battery,
	// the SIM): each answers within a second or two, and one that hangs (the
	// Termux:API app stopped by Android) must not hold the inbox poll or a
	// hello for long. termux-sms-send keeps the agent's send timeout.
	queryTimeout = 30 * time.Second
)

var (
	send = agent.Tool{Name: "termux-sms-send",
		Install: "install the Termux:API app (from F-Droid, like Termux) and run `pkg install termux-api` in Termux",
		Grant:   "allow the SMS and Phone permissions of the Termux:API app (Android Settings > Apps > Termux:API > Permissions)"}
	list = agent.Tool{Name: "termux-sms-list",
		Install: send.Install,
		Grant:   "allow the SMS permission of the Termux:API app (Android Settings > Apps > Termux:API > Permissions)",
		Timeout: queryTimeout}
	battery = agent.Tool{Name: "termux-battery-status",
		Install: send.Install,
		Grant:   "check that the Termux:API app is installed and may run in the background",
		Timeout: queryTimeout}
	// getprop tells Android's time zone, the one Termux:API writes its
	// dates in. Termux puts a wrapper of /system/bin/getprop in PATH.
	getprop    = agent.Tool{Name: "getprop", Timeout: queryTimeout}
	deviceinfo = agent.Tool{Name: "termux-telephony-deviceinfo",
		Install: send.Install,
		Grant:   "allow the Phone permission of the Termux:API app, or name the SIMs with --sims",
		Timeout: queryTimeout}
)

// Config configures the transport.
type Config struct {
	// SIMs, when set, are announced as they are; otherwise
	// termux-telephony-deviceinfo is asked (it sees one SIM: a dual-SIM
	// phone names its SIMs here).
	SIMs []proto.SIM
	// InboundSIM is the slot reported for received messages:
	// termux-sms-list does not say which SIM received one. Default SIM1.
	InboundSIM string
	Poll       time.Duration
	PageSize   int
	Logger     *slog.Logger
}

// Transport drives Termux:API.
type Transport struct{ cfg Config }

// New returns the transport.
func New(cfg Config) *Transport {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.InboundSIM == "" {
		cfg.InboundSIM = proto.SIM1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Transport{cfg: cfg}
}

func (t *Transport) Name() string { return "termux" }

// Check finds the tools in PATH.
func (t *Transport) Check(context.Context) error {
	tools := []agent.Tool{send, list}
	if t.cfg.SIMs == nil {
		tools = append(tools, deviceinfo)
	}
	for _, tool := range tools {
		if err := tool.Check(); err != nil {
			return err
		}
	}
	return nil
}

// deviceInfo is what the agent reads of termux-telephony-deviceinfo.
type deviceInfo struct {
	SIMState            string `json:"sim_state"`
	SIMOperatorName     string `json:"sim_operator_name"`
	PhoneCount          int    `json:"phone_count"`
	NetworkType         string `json:"network_type"`
	NetworkOperatorName string `json:"network_operator_name"`
}

func (t *Transport) deviceInfo(ctx context.Context) (deviceInfo, error) {
	var info deviceInfo
	out, err := deviceinfo.Run(ctx, "")
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return info, fmt.Errorf("termux-telephony-deviceinfo printed %.100q: %w", out, err)
	}
	return info, nil
}

// Inventory announces the configured SIMs, or the one Android reports,
// and the phone's health.
func (t *Transport) Inventory(ctx context.Context) (agent.Inventory, error) {
	info, err := t.deviceInfo(ctx)
	if t.cfg.SIMs != nil {
		if err != nil {
			t.cfg.Logger.Debug("no network type for the health report", "err", err)
			return agent.Inventory{SIMs: t.cfg.SIMs, Health: t.health(ctx, nil)}, nil
		}
		return agent.Inventory{SIMs: t.cfg.SIMs, Health: t.health(ctx, &info)}, nil
	}
	if err != nil {
		return agent.Inventory{}, err
	}
	if !strings.EqualFold(info.SIMState, "ready") {
		t.cfg.Logger.Warn("no SIM ready in the phone", "sim_state", info.SIMState)
		return agent.Inventory{SIMs: []proto.SIM{}, Health: t.health(ctx, &info)}, nil
	}
	if info.PhoneCount > 1 {
		t.cfg.Logger.Info("a dual-SIM phone: Termux:API describes one SIM; name both with --sims SIM1,SIM2")
	}
	// The server takes at most 64 bytes; cut on a character boundary.
	carrier := proto.CutBytes(info.SIMOperatorName, 64)
	return agent.Inventory{SIMs: []proto.SIM{{Slot: proto.SIM1, Carrier: carrier}}, Health: t.health(ctx, &info)}, nil
}

// health is the phone's state: battery and charger from
// termux-battery-status, the network type and the operator the SIM is
// registered with from termux-telephony-deviceinfo (info; nil when it did
// not answer). Termux:API tells no signal strength without location
// access, so signal stays unknown. What a tool does not tell is left out.
func (t *Transport) health(ctx context.Context, info *deviceInfo) *proto.Health {
	h := &proto.Health{}
	if out, err := battery.Run(ctx, ""); err != nil {
		t.cfg.Logger.Debug("no battery for the health report", "err", err)
	} else {
		var b struct {
			Percentage *int   `json:"percentage"`
			Plugged    string `json:"plugged"`
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.cfg.Logger.Debug("termux-battery-status printed something else than JSON", "out", fmt.Sprintf("%.100q", out))
		} else {
			h.Battery = b.Percentage
			if b.Plugged != "" {
				charging := !strings.EqualFold(b.Plugged, "UNPLUGGED")
				h.Charging = &charging
			}
		}
	}
	if info != nil {
		if nt := strings.ToLower(info.NetworkType); nt != "" && nt != "unknown" {
			h.Network = nt
		}
		if info.NetworkOperatorName != "" && strings.EqualFold(info.SIMState, "ready") {
			h.SIMs = []proto.SIMHealth{{Slot: proto.SIM1, Operator: info.NetworkOperatorName}}
		}
	}
	return h
}

// slotIndex is termux-sms-send's -s value: Android's logical slot index.
func slotIndex(slot string) string {
	if slot == proto.SIM2 {
		return "1"
	}
	return "0"
}

// Execute runs termux-sms-send -n NUMBER -s SLOT with the text on stdin.
// -s is given only for SIMs named in Config.SIMs: the one SIM
// termux-telephony-deviceinfo describes is Android's default, whatever its
// slot, and termux-sms-send drops a message without a word (exit status 0,
// no output) when the slot it is given holds no SIM, as slot 0 does on a
// dual-SIM phone with its only SIM in the second tray. The number must be
// E.164 (as the server sends it): termux-sms-send reads
// commas in -n's value as a list of recipients and splits it at spaces
// into further arguments of the command it runs, so anything else is
// refused (invalid_job) without running it.
func (t *Transport) Execute(ctx context.Context, job agent.Job) (agent.Outcome, error) {
	if !e164(job.To) {
		return agent.Outcome{Status: proto.StatusFailed, Error: "invalid_job"}, nil
	}
	args := []string{"-n", job.To}
	if t.cfg.SIMs != nil {
		args = append(args, "-s", slotIndex(job.SIMSlot))
	}
	if _, err := send.Run(ctx, job.Message, args...); err != nil {
		return agent.Outcome{}, err
	}
	// Android reports nothing more to Termux: handed over is "sent".
	return agent.Outcome{Status: proto.StatusSent}, nil
}

// message is one row of termux-sms-list.
type message struct {
	ID       int64  `json:"_id"`
	Type     string `json:"type"`
	Number   string `json:"number"`
	Received string `json:"received"`
	Body     string `json:"body"`
}

func (t *Transport) read(ctx context.Context, box string, offset int) ([]message, error) {
	out, err := list.Run(ctx, "", "-t", box, "-l", strconv.Itoa(t.cfg.PageSize), "-o", strconv.Itoa(offset))
	if err != nil {
		return nil, err
	}
	var msgs []message
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		return nil, fmt.Errorf("termux-sms-list printed %.100q: %w", out, err)
	}
	return msgs, nil
}

// zone is the time zone of termux-sms-list's dates: Termux:API formats
// them in Android's zone (persist.sys.timezone, asked each time: a phone
// that travels changes it). The agent's own local zone is no guide: Go
// finds none on Android (no /etc/localtime, no zoneinfo files) and takes
// UTC, so a phone west of UTC had its messages received hours early, and a
// job it sent before a crash not found in the sent box. Without an answer
// the agent's local zone is used.
func (t *Transport) zone(ctx context.Context) *time.Location {
	out, err := getprop.Run(ctx, "", "persist.sys.timezone")
	var te *agent.ToolError
	if errors.As(err, &te) && te.Kind == "missing" {
		out, err = agent.Tool{Name: "/system/bin/getprop", Timeout: queryTimeout}.Run(ctx, "", "persist.sys.timezone")
	}
	name := strings.TrimSpace(out)
	if err != nil || name == "" {
		t.cfg.Logger.Debug("Android's time zone unknown; dates of termux-sms-list read in the local zone", "err", err)
		return time.Local
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.cfg.Logger.Warn("Android's time zone is unknown to the agent; dates of termux-sms-list read in the local zone", "zone", name, "err", err)
		return time.Local
	}
	return loc
}

// Recover looks for the job in the sent box: Android records every SMS an
// app sent there, so a match (same number, same text, written after the
// job was dispatched) proves it went out. Termux:API trims the text it
// reads (Java's String.trim: every character up to U+0020 at either end)
// before it sends it, so the sent box holds the text trimmed.
func (t *Transport) Recover(ctx context.Context, job agent.Job) (agent.Outcome, bool) {
	msgs, err := t.read(ctx, "sent", 0)
	if err != nil {
		t.cfg.Logger.Warn("cannot read the sent box to recover a job", "id", job.ID, "err", err)
		return agent.Outcome{}, false
	}
	text := strings.TrimFunc(job.Message, func(r rune) bool { return r <= ' ' })
	var loc *time.Location
	for _, m := range msgs {
		if m.Body != text || !sameNumber(m.Number, job.To) {
			continue
		}
		if loc == nil {
			loc = t.zone(ctx)
		}
		at, err := time.ParseInLocation(time.DateTime, m.Received, loc)
		if err == nil && at.Before(job.DispatchedAt.Add(-time.Minute)) {
			continue // an older message with the same text
		}
		return agent.Outcome{Status: proto.StatusSent}, true
	}
	return agent.Outcome{}, false
}

// e164 is a number as the server sends it: +, then 8 to 15 digits, the
// first not 0.
func e164(n string) bool {
	if len(n) < 9 || len(n) > 16 || n[0] != '+' || n[1] == '0' {
		return false
	}
	return digits(n[1:]) == n[1:]
}

// sameNumber says whether the sent box's number is the job's: the same
// digits, or, where the phone wrote it in its national form (0151 ...
// for +49151 ...), the same last 7 digits, as Android's own loose match
// of numbers compares them.
func sameNumber(box, to string) bool {
	a, b := digits(box), digits(to)
	if a == b {
		return true
	}
	const minMatch = 7
	return len(a) >= minMatch && len(b) >= minMatch && a[len(a)-minMatch:] == b[len(b)-minMatch:]
}

func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Delivery is never asked: Termux gets no delivery reports.
func (t *Transport) Delivery(context.Context, string) (agent.Delivery, error) {
	return agent.Delivery{}, nil
}

// Acknowledge has nothing to do: only the default SMS app may delete
// provider rows (PROTOCOL.md 17.5); the mark keeps a message from being
// forwarded twice.
func (t *Transport) Acknowledge(context.Context, agent.Received) error { return nil }

// ClearedKeyRetention is how long the journal keeps the key of a message
// cleared at the source. The key is the provider _id, and the inbox is read
// above the mark only: the mark is stored in the same commit as the
// messages, and is at least the _id of every one taken, so a cleared
// message's _id is never read again, however old. The week kept is not
// needed for that; it keeps a week's ids at hand to a person looking into
// the journal.
func (t *Transport) ClearedKeyRetention() time.Duration { return ClearedKeyRetention }

// ClearedKeyRetention is Transport.ClearedKeyRetention.
const ClearedKeyRetention = 7 * 24 * time.Hour

// Receive polls the inbox for messages newer than the journal's mark. On
// the first start it sets the mark to the newest message without
// forwarding anything: an inbox's history is not news.
func (t *Transport) Receive(ctx context.Context, sink agent.Sink) error {
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		if err := t.poll(ctx, sink); err != nil && ctx.Err() == nil {
			t.cfg.Logger.Warn("reading the inbox failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (t *Transport) poll(ctx context.Context, sink agent.Sink) error {
	markText, err := sink.Mark(markKey)
	if err != nil {
		return err
	}
	first := markText == ""
	mark, _ := strconv.ParseInt(markText, 10, 64)
	var fresh []message
	newest := mark
	// The tool lists the inbox newest date first, and the mark is an _id:
	// a new message dated before old ones (the phone's clock set back, an
	// app writing a late date) sits below them. The walk ends at a page
	// that holds nothing above the mark, not at the first old message.
	complete := false // the walk met a page of old messages or the inbox's end
	for page := 0; page < maxPages; page++ {
		msgs, err := t.read(ctx, "inbox", page*t.cfg.PageSize)
		if err != nil {
			return err
		}
		anyNew := false
		for _, m := range msgs {
			if m.ID <= 0 {
				return fmt.Errorf("termux-sms-list printed a message without _id: update the Termux:API app and the termux-api package")
			}
			newest = max(newest, m.ID)
			if m.ID <= mark {
				continue
			}
			anyNew = true
			fresh = append(fresh, m)
		}
		if first || !anyNew || len(msgs) < t.cfg.PageSize {
			complete = true
			break
		}
	}
	if !complete {
		// The mark moves past what was not read: say so, rather than lose
		// those messages without a word.
		oldest := newest
		for _, m := range fresh {
			oldest = min(oldest, m.ID)
		}
		t.cfg.Logger.Warn("more new messages in the inbox than one poll reads: the older ones are not forwarded",
			"read", len(fresh), "max", maxPages*t.cfg.PageSize, "not_forwarded_ids_above", mark, "not_forwarded_ids_below", oldest)
	}
	if first {
		t.cfg.Logger.Info("first start: messages already in the inbox are not forwarded", "newest_id", newest)
		return sink.Take(nil, markKey, strconv.FormatInt(newest, 10))
	}
	if len(fresh) == 0 {
		return nil
	}
	// Oldest first, whatever order the tool printed them in.
	slices.SortFunc(fresh, func(a, b message) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]agent.Received, 0, len(fresh))
	loc := t.zone(ctx)
	for _, m := range fresh {
		at, err := time.ParseInLocation(time.DateTime, m.Received, loc)
		if err != nil {
			at = time.Now()
		}
		out = append(out, agent.Received{Key: "sms-inbox-" + strconv.FormatInt(m.ID, 10), Channel: proto.ChannelSMS,
			From: m.Number, Text: m.Body, SIMSlot: t.cfg.InboundSIM, At: at})
	}
	return sink.Take(out, markKey, strconv.FormatInt(newest, 10))
}
