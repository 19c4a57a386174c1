// Package modem is the agent's transport for a USB cellular modem under
// ModemManager, through mmcli and its JSON output (-J, ModemManager 1.10
// and later):
//
//	mmcli -m any -J                                  the modem: operator, own number, signal, access technology
//	mmcli -m any --messaging-create-sms=PROPS        "Successfully created new SMS: PATH"
//	mmcli -s PATH --send                             "successfully sent the SMS"
//	mmcli -s PATH -J                                 {"sms":{"content":{...},"properties":{...}}}
//	mmcli -m any --messaging-list-sms -J             {"modem.messaging.sms":[PATH...]}
//	mmcli -m any --messaging-delete-sms=PATH         "successfully deleted SMS from modem"
//
// An SMS is created with delivery-report-request=yes, so the modem's
// delivery state turns into "delivered" or "failed". ModemManager joins the
// parts of a multipart SMS into one SMS object (state "receiving" until the
// last part came, then "received"): the transport forwards only "received"
// objects, so a multipart message arrives as one. A received SMS is deleted
// from the modem only after the server's inbound_ack.
package modem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// DefaultPoll is how often the modem's SMS list is read.
const DefaultPoll = 5 * time.Second

var mmcli = agent.Tool{Name: "mmcli",
	Install: "install ModemManager (e.g. `sudo apt install modemmanager`) and check that `mmcli -L` lists the modem",
	Grant:   "run the agent as root or as a user that polkit allows to use ModemManager (see docs/agents.md)"}

// busctl (systemd) reads an SMS's text from ModemManager over D-Bus when
// mmcli cannot tell it (see text).
var busctl = agent.Tool{Name: "busctl",
	Install: "busctl comes with systemd; without it a received SMS whose text is \"--\", \"none\" or \"unknown\" is forwarded empty",
	Grant:   "run the agent as a user the system bus lets read ModemManager's properties (as mmcli does)"}

// Config configures the transport.
type Config struct {
	// Modem is mmcli's -m value: "any" (the first modem), an index or a
	// D-Bus path.
	Modem string
	// Number is the SIM's own number (E.164) when the modem does not know it.
	Number string
	Poll   time.Duration
	Logger *slog.Logger
}

// Transport drives ModemManager.
type Transport struct {
	cfg Config

	// listMu makes a poll and the deletion of an acknowledged message one
	// after the other: a poll never gives the next key to an SMS it read
	// before its message was deleted and forgotten.
	listMu sync.Mutex

	mu sync.Mutex
	// gone are the sent SMS objects ModemManager no longer has, with when
	// each was found gone: kept while a job may still ask about it
	// (agent.DefaultDeliveryWait), and dropped when a new SMS gets its
	// path (ModemManager numbers its objects from the start again when it
	// restarts).
	gone map[string]time.Time
	now  func() time.Time
	sink agent.Sink // Receive's, for Acknowledge

	textWarned sync.Once // busctl could not read a text (logged once)
}

// New returns the transport.
func New(cfg Config) *Transport {
	if cfg.Modem == "" {
		cfg.Modem = "any"
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Transport{cfg: cfg, gone: map[string]time.Time{}, now: time.Now}
}

func (t *Transport) Name() string { return "modem" }

// Check finds mmcli. The modem itself may still be starting: the agent
// asks for it (Inventory) before each connection.
func (t *Transport) Check(context.Context) error {
	return mmcli.Check()
}

type modemInfo struct {
	Modem struct {
		ThreeGPP struct {
			OperatorName string `json:"operator-name"`
		} `json:"3gpp"`
		Generic struct {
			OwnNumbers    []string `json:"own-numbers"`
			State         string   `json:"state"`
			AccessTech    []string `json:"access-technologies"`
			SignalQuality struct {
				Value string `json:"value"`
			} `json:"signal-quality"`
		} `json:"generic"`
	} `json:"modem"`
}

func (t *Transport) modem(ctx context.Context) (modemInfo, error) {
	var info modemInfo
	out, err := mmcli.Run(ctx, "", "-m", t.cfg.Modem, "-J")
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return info, fmt.Errorf("mmcli -m %s -J printed %.100q: %w", t.cfg.Modem, out, err)
	}
	return info, nil
}

// Inventory announces the modem's SIM as SIM1.
func (t *Transport) Inventory(ctx context.Context) (agent.Inventory, error) {
	info, err := t.modem(ctx)
	if err != nil {
		return agent.Inventory{}, err
	}
	sim := proto.SIM{Slot: proto.SIM1, PhoneNumber: t.cfg.Number}
	if op := info.Modem.ThreeGPP.OperatorName; op != "--" && len(op) <= 64 {
		sim.Carrier = op
	}
	if sim.PhoneNumber == "" {
		for _, n := range info.Modem.Generic.OwnNumbers {
			if e164(n) {
				sim.PhoneNumber = n
				break
			}
		}
	}
	return agent.Inventory{SIMs: []proto.SIM{sim}, Health: health(info, sim.Carrier)}, nil
}

// health is the modem's state as mmcli tells it: its signal quality (a
// percentage), its access technology and the operator it is registered
// with. A modem has no battery: battery and charging stay unknown.
func health(info modemInfo, operator string) *proto.Health {
	h := &proto.Health{}
	if q, err := strconv.Atoi(info.Modem.Generic.SignalQuality.Value); err == nil && q >= 0 && q <= 100 {
		h.Signal = &q
	}
	if techs := info.Modem.Generic.AccessTech; len(techs) > 0 {
		switch tech := strings.ToLower(techs[0]); tech {
		case "5gnr":
			h.Network = "nr"
		case "--", "unknown":
		default:
			h.Network = tech
		}
	}
	if operator != "" {
		h.SIMs = []proto.SIMHealth{{Slot: proto.SIM1, Operator: operator}}
	}
	return h
}

// e164 keeps a hello valid: a number the server would refuse is left out.
func e164(n string) bool {
	if len(n) < 9 || len(n) > 16 || n[0] != '+' || n[1] == '0' {
		return false
	}
	for _, r := range n[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// quote writes a value of mmcli's key=value list. Its parser takes a value
// between single or double quotes, without escapes: a text holding both
// kinds of quote cannot be written.
func quote(s string) (string, bool) {
	switch {
	case !strings.Contains(s, "'"):
		return "'" + s + "'", true
	case !strings.Contains(s, `"`):
		return `"` + s + `"`, true
	}
	return "", false
}

// Execute creates the SMS with a delivery report requested, journals its
// path, and sends it. A number that is not E.164 (as the server sends it)
// is refused (invalid_job) before mmcli is run, and so is a text holding
// Ctrl-Z or ESC (text_not_supported): on a modem in text mode
// ModemManager writes the text raw after AT+CMGS and ends it with Ctrl-Z,
// so a Ctrl-Z inside it would end the SMS there and hand the rest to the
// modem as AT commands, and an ESC would cancel the send.
func (t *Transport) Execute(ctx context.Context, job agent.Job) (agent.Outcome, error) {
	if !e164(job.To) {
		return agent.Outcome{Status: proto.StatusFailed, Error: "invalid_job"}, nil
	}
	text, ok := quote(job.Message)
	number, ok2 := quote(job.To)
	if !ok || !ok2 || strings.ContainsAny(job.Message, "\x1a\x1b") {
		return agent.Outcome{Status: proto.StatusFailed, Error: "text_not_supported"}, nil
	}
	props := "number=" + number + ",text=" + text + ",delivery-report-request=yes"
	out, err := mmcli.Run(ctx, "", "-m", t.cfg.Modem, "--messaging-create-sms="+props)
	if err != nil {
		return agent.Outcome{}, err
	}
	_, path, found := strings.Cut(strings.TrimSpace(out), "Successfully created new SMS:")
	path = strings.TrimSpace(path)
	if !found || !strings.HasPrefix(path, "/") {
		return agent.Outcome{}, fmt.Errorf("mmcli created no SMS: it printed %.100q", out)
	}
	t.mu.Lock()
	delete(t.gone, path) // a new SMS under the path of one lost before
	t.mu.Unlock()
	if err := job.Remember(path); err != nil {
		return agent.Outcome{}, err
	}
	if _, err := mmcli.Run(ctx, "", "-s", path, "--send", sendTimeoutFlag); err != nil {
		if out, ok := t.afterSendError(ctx, job, path, err); ok {
			return out, nil
		}
		t.delete(ctx, path)
		return agent.Outcome{}, err
	}
	return agent.Outcome{Status: proto.StatusSent, Ref: path, AwaitDelivery: true}, nil
}

// sendTimeoutFlag lets mmcli wait for ModemManager's answer to a send for
// 100 s rather than D-Bus's 25 s, which a slow network or an SMS of two
// parts outlasts (ModemManager gives the modem 30 s for AT+CMGS and 10 s
// more for each part's text); it stays inside the agent's two minutes for
// a send (agent.DefaultToolTimeout).
const sendTimeoutFlag = "--timeout=100"

// How long a send mmcli gave up on is watched, and how often its SMS
// object is read meanwhile (variables: the tests shorten them).
var (
	sendSettle     = 90 * time.Second
	sendSettlePoll = time.Second
)

// afterSendError reads the SMS object after mmcli --send failed (err):
// ModemManager marks it sent only once the modem took every part, so
// "sent" proves it went out, whatever mmcli said. mmcli gives up after
// sendTimeoutFlag ("Timeout was reached") while ModemManager goes on
// sending (a long SMS): then the object is watched for sendSettle, or
// until the send's time (ctx) is up. One sent in
// that time is reported sent; one still unsent is deleted and reported
// failed outcome_unknown, as after a crash (the modem may yet send a part
// it took). Any other error of mmcli's is ModemManager's answer: false,
// and the caller deletes the SMS and fails the job.
func (t *Transport) afterSendError(ctx context.Context, job agent.Job, path string, err error) (agent.Outcome, bool) {
	sent := func() bool {
		info, ierr := t.sms(ctx, path)
		return ierr == nil && info.SMS.Properties.State == "sent"
	}
	ok := agent.Outcome{Status: proto.StatusSent, Ref: path, AwaitDelivery: true}
	if sent() {
		t.cfg.Logger.Warn("mmcli reported the send failed, but the modem has the SMS sent: reported sent", "id", job.ID, "path", path, "err", err)
		return ok, true
	}
	if !strings.Contains(err.Error(), "Timeout was reached") {
		return agent.Outcome{}, false
	}
	t.cfg.Logger.Warn("mmcli gave up waiting for the send; watching the SMS", "id", job.ID, "path", path, "for", sendSettle)
	settle := time.NewTimer(sendSettle)
	defer settle.Stop()
	tick := time.NewTicker(sendSettlePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return agent.Outcome{Status: proto.StatusFailed, Error: "outcome_unknown"}, true
		case <-settle.C:
			t.delete(ctx, path)
			t.cfg.Logger.Error("the SMS mmcli gave up on was not sent in time: outcome unknown", "id", job.ID, "path", path)
			return agent.Outcome{Status: proto.StatusFailed, Error: "outcome_unknown"}, true
		case <-tick.C:
			if sent() {
				t.cfg.Logger.Info("the SMS mmcli gave up on was sent", "id", job.ID, "path", path)
				return ok, true
			}
		}
	}
}

func (t *Transport) delete(ctx context.Context, path string) {
	if _, err := mmcli.Run(ctx, "", "-m", t.cfg.Modem, "--messaging-delete-sms="+path); err != nil {
		t.cfg.Logger.Warn("could not delete an SMS from the modem", "path", path, "err", err)
	}
}

type smsInfo struct {
	SMS struct {
		DBusPath string `json:"dbus-path"`
		Content  struct {
			Number string `json:"number"`
			Text   string `json:"text"`
		} `json:"content"`
		Properties struct {
			PDUType       string `json:"pdu-type"`
			State         string `json:"state"`
			Timestamp     string `json:"timestamp"`
			DeliveryState string `json:"delivery-state"`
		} `json:"properties"`
	} `json:"sms"`
}

func (t *Transport) sms(ctx context.Context, path string) (smsInfo, error) {
	var info smsInfo
	out, err := mmcli.Run(ctx, "", "-s", path, "-J")
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return info, fmt.Errorf("mmcli -s %s -J printed %.100q: %w", path, out, err)
	}
	return info, nil
}

// Recover asks the modem about the SMS object journaled before the send:
// "sent" (or "sending") proves it went out; "stored" proves it did not,
// and it is reported failed ("interrupted") and deleted, not sent again.
func (t *Transport) Recover(ctx context.Context, job agent.Job) (agent.Outcome, bool) {
	if job.Ref == "" {
		return agent.Outcome{}, false
	}
	info, err := t.sms(ctx, job.Ref)
	if err != nil {
		return agent.Outcome{}, false
	}
	switch info.SMS.Properties.State {
	case "sent", "sending":
		return agent.Outcome{Status: proto.StatusSent, Ref: job.Ref, AwaitDelivery: true}, true
	case "stored":
		t.delete(ctx, job.Ref)
		return agent.Outcome{Status: proto.StatusFailed, Error: "interrupted"}, true
	}
	return agent.Outcome{}, false
}

// Delivery reads the modem's delivery state of a sent SMS. ModemManager
// names it after the status report's TP-Status: "completed-*" is
// delivered, "temporary-*" still trying, anything else failed. A final
// state frees the modem's storage.
//
// ModemManager renumbers its SMS objects when it restarts (a modem reset
// on USB restarts it too), and a sent one that was never stored is gone:
// its report can no longer be read. Such an SMS is not asked about again
// (its job stays sent), rather than a failing mmcli call and a warning for
// each one at every poll for the 72 hours the agent waits.
func (t *Transport) Delivery(ctx context.Context, ref string) (agent.Delivery, error) {
	t.mu.Lock()
	_, gone := t.gone[ref]
	t.mu.Unlock()
	if gone {
		return agent.Delivery{}, nil
	}
	info, err := t.sms(ctx, ref)
	if err != nil {
		if notFound(err) {
			t.mu.Lock()
			now := t.now()
			for p, at := range t.gone {
				if now.Sub(at) > agent.DefaultDeliveryWait {
					delete(t.gone, p) // no job asks about it any more
				}
			}
			t.gone[ref] = now
			t.mu.Unlock()
			t.cfg.Logger.Info("the modem no longer has a sent SMS (ModemManager restarted); its delivery report cannot be read, and the job stays sent", "path", ref)
			return agent.Delivery{}, nil
		}
		return agent.Delivery{}, err
	}
	ds := info.SMS.Properties.DeliveryState
	var d agent.Delivery
	switch {
	case ds == "" || ds == "--" || ds == "unknown" || strings.HasPrefix(ds, "temporary"):
		return d, nil
	case strings.HasPrefix(ds, "completed"):
		d = agent.Delivery{Final: true, Status: proto.StatusDelivered}
	default:
		d = agent.Delivery{Final: true, Status: proto.StatusFailed, Error: "delivery_failed"}
	}
	t.delete(ctx, ref)
	return d, nil
}

// Receive polls the modem's SMS list and journals each complete received
// message; it stays on the modem until Acknowledge.
func (t *Transport) Receive(ctx context.Context, sink agent.Sink) error {
	tick := time.NewTicker(t.cfg.Poll)
	defer tick.Stop()
	for {
		if err := t.poll(ctx, sink); err != nil && ctx.Err() == nil {
			t.cfg.Logger.Warn("reading the modem's messages failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (t *Transport) poll(ctx context.Context, sink agent.Sink) error {
	t.listMu.Lock()
	defer t.listMu.Unlock()
	t.mu.Lock()
	t.sink = sink
	t.mu.Unlock()
	got, err := t.received(ctx, sink)
	if err != nil || len(got) == 0 {
		return err
	}
	return sink.Take(got, "", "")
}

// received reads the modem's complete received SMS, each with its key.
//
// The object path changes when ModemManager restarts; the content does
// not, so the key is made of it: "modem-" and a hash of the sender, the
// service centre's timestamp (to the second) and the text as mmcli shows
// it. Two SMS can have the same content: a sender's double tap within a
// second, or the same text again with a timestamp the modem does not
// give. Such SMS get the keys KEY, KEY#2, KEY#3... in turn: each takes
// the first one that no SMS before it in this listing took and whose
// message was not cleared from the modem (Sink.Seen). A message still on
// the modem keeps its key across restarts of the agent and of
// ModemManager (its journal record is held until it is deleted), and one
// that comes after an earlier one of the same content was deleted gets
// the next key rather than being taken for it.
func (t *Transport) received(ctx context.Context, sink agent.Sink) ([]agent.Received, error) {
	out, err := mmcli.Run(ctx, "", "-m", t.cfg.Modem, "--messaging-list-sms", "-J")
	if err != nil {
		return nil, err
	}
	var paths struct {
		SMS []string `json:"modem.messaging.sms"`
	}
	if err := json.Unmarshal([]byte(out), &paths); err != nil {
		return nil, fmt.Errorf("mmcli --messaging-list-sms -J printed %.100q: %w", out, err)
	}
	var got []agent.Received
	taken := map[string]bool{} // keys of this listing
	for _, p := range paths.SMS {
		info, err := t.sms(ctx, p)
		if err != nil {
			t.cfg.Logger.Warn("cannot read an SMS of the modem", "path", p, "err", err)
			continue
		}
		pr := info.SMS.Properties
		if pr.PDUType != "deliver" || pr.State != "received" {
			continue // sent by us, a status report, or parts still coming
		}
		c := info.SMS.Content
		text := c.Text
		if text == "--" {
			text = t.text(ctx, p)
		}
		at, err := time.Parse(time.RFC3339, pr.Timestamp)
		if err != nil {
			// Some modems give the offset in hours only: +01.
			if at, err = time.Parse("2006-01-02T15:04:05-07", pr.Timestamp); err != nil {
				at = time.Now()
			}
		}
		key, err := nextKey(sink, contentKey(info), taken)
		if err != nil {
			return nil, err
		}
		got = append(got, agent.Received{Key: key, Channel: proto.ChannelSMS,
			From: c.Number, Text: text, SIMSlot: proto.SIM1, At: at, Ref: []string{p}})
	}
	return got, nil
}

// contentKey is the key of an SMS's content: its sender, timestamp and
// text as mmcli shows them ("--" read as "", whatever busctl says of it,
// so that the key never depends on busctl's answer).
func contentKey(info smsInfo) string {
	c := info.SMS.Content
	text := c.Text
	if text == "--" {
		text = ""
	}
	sum := sha256.Sum256([]byte(c.Number + "\x00" + info.SMS.Properties.Timestamp + "\x00" + text))
	return "modem-" + hex.EncodeToString(sum[:16])
}

// nextKey is the first of base, base#2, base#3... not in taken and not
// cleared in the journal; it is added to taken.
func nextKey(sink agent.Sink, base string, taken map[string]bool) (string, error) {
	for n := 1; ; n++ {
		key := base
		if n > 1 {
			key += "#" + strconv.Itoa(n)
		}
		if taken[key] {
			continue
		}
		seen, err := sink.Seen(key)
		if err != nil {
			return "", err
		}
		if seen == agent.SeenCleared {
			continue // that one was deleted from the modem: this is another
		}
		taken[key] = true
		return key, nil
	}
}

// text is the Text property of the received SMS at path, read from
// ModemManager over D-Bus with busctl. mmcli prints "--" for an SMS
// without text and just the same for one whose text is "", "--",
// "unknown" or "none": its output (mmcli-output.c) drops the values
// "unknown" and "none" as absent ones, libmm-glib returns an empty text
// as absent, and an absent value is printed "--", in the JSON and the
// key-value (-K) output alike. So when mmcli says "--" the text is asked
// of ModemManager itself. Without busctl, or when it fails, the text is
// taken as "" (logged once): the message is forwarded all the same.
func (t *Transport) text(ctx context.Context, path string) string {
	out, err := busctl.Run(ctx, "", "--system", "--json=short", "get-property",
		"org.freedesktop.ModemManager1", path, "org.freedesktop.ModemManager1.Sms", "Text")
	if err == nil {
		var v struct {
			Type string  `json:"type"`
			Data *string `json:"data"`
		}
		if err = json.Unmarshal([]byte(out), &v); err == nil && (v.Type != "s" || v.Data == nil) {
			err = fmt.Errorf("busctl printed %.100q, not a string", out)
		}
		if err == nil {
			return *v.Data
		}
	}
	t.textWarned.Do(func() {
		t.cfg.Logger.Warn("mmcli shows a received SMS's text as --, which is also how it shows the texts \"--\", \"none\" and \"unknown\", and busctl could not read the text itself: such a text is forwarded empty", "path", path, "err", err)
	})
	return ""
}

// The transport has no ClearedKeyRetention (agent.ClearedKeys): the
// journal keeps every cleared key for ever. Its keys are not the SMS's own
// ids but its content (received, nextKey): a key cleared and forgotten
// would go to the next SMS of the same content (a sender, timestamp and
// text the modem shows alike, as one that gives no timestamp does), whose
// client_id would then be the forwarded one's, and the server answers such
// a repeat without storing it (PROTOCOL.md 10.2): that SMS would be lost.
//
// Acknowledge deletes the stored message from the modem: the SMS at its
// journaled path when that still holds its content. ModemManager renumbers
// its SMS objects when it restarts, so the path may be gone or hold
// another SMS (never deleted for it): the message is then found in the
// listing by its key, as poll gives it, and deleted there. No SMS with
// its key on the modem: it is gone already.
func (t *Transport) Acknowledge(ctx context.Context, msg agent.Received) error {
	t.listMu.Lock()
	defer t.listMu.Unlock()
	key := msg.Key
	if i := strings.LastIndex(key, "modem-"); i >= 0 {
		key = key[i:] // a record journaled before keys were kept names its client_id
	}
	base, _, _ := strings.Cut(key, "#")
	if !strings.HasPrefix(key, "modem-") || len(base) != len("modem-")+32 {
		// Not a key of this transport's (a client_id hashed for its
		// length): the journaled paths, as they are.
		for _, p := range msg.Ref {
			if err := t.deleteSMS(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range msg.Ref {
		info, err := t.sms(ctx, p)
		if err != nil {
			if notFound(err) {
				continue
			}
			return err
		}
		if contentKey(info) == base {
			return t.deleteSMS(ctx, p)
		}
	}
	t.mu.Lock()
	sink := t.sink
	t.mu.Unlock()
	if sink == nil {
		return errors.New("modem: the SMS list was not read yet; the message is deleted after the first poll")
	}
	got, err := t.received(ctx, sink)
	if err != nil {
		return err
	}
	for _, m := range got {
		if m.Key == key {
			t.cfg.Logger.Info("a stored message moved to another path (ModemManager restarted); deleted there", "old", strings.Join(msg.Ref, ","), "path", m.Ref[0])
			return t.deleteSMS(ctx, m.Ref[0])
		}
	}
	return nil
}

// deleteSMS deletes an SMS from the modem; one already gone is no error.
func (t *Transport) deleteSMS(ctx context.Context, path string) error {
	if _, err := mmcli.Run(ctx, "", "-m", t.cfg.Modem, "--messaging-delete-sms="+path); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// notFound reports mmcli's answer for an SMS object ModemManager does not
// have.
func notFound(err error) bool {
	return strings.Contains(err.Error(), "couldn't find") || strings.Contains(err.Error(), "not found")
}
