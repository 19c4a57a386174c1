package androidproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Version is the protocol version this build speaks, sent in hello.
const Version = 1

// MaxFrameBytes bounds one frame in either direction.
const MaxFrameBytes = 64 << 10

// MaxEchoBytes bounds each value of a phone's frame that the server repeats
// in an error frame (a frame type, id, client_id or field name): the answer
// to a bad frame stays small whatever the frame held. It is the longest
// valid client_id, so a valid id always comes back whole.
const MaxEchoBytes = 128

// MaxJobIDBytes is the longest id a send frame's job may have: job ids are
// UUIDs (36 bytes), so a send whose id is empty or longer names no job
// (section 8.3: a phone ignores it), and an ack or status naming a longer
// one is answered not_found without a look in the store.
const MaxJobIDBytes = 128

// MaxClientIDBytes is the longest client_id an inbound may carry (section
// 10.2: 1 to 128 bytes of UTF-8).
const MaxClientIDBytes = 128

// Frame types.
const (
	TypeHello      = "hello"
	TypeWelcome    = "welcome"
	TypeSend       = "send"
	TypeAck        = "ack"
	TypeStatus     = "status"
	TypeStatusAck  = "status_ack"
	TypeInbound    = "inbound"
	TypeInboundAck = "inbound_ack"
	TypeConfig     = "config"
	TypeError      = "error"
	TypeHealth     = "health"
)

// Channels of a send or inbound frame.
const (
	ChannelSMS      = "sms"
	ChannelWhatsApp = "whatsapp"
	ChannelIMessage = "imessage"
)

// Outcomes a phone reports in a status frame.
const (
	StatusSent      = "sent"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// Details of a delivered report (Status.Detail), agent channels only.
const (
	// DetailRead: the recipient opened the message (WhatsApp's blue ticks).
	DetailRead = "read"
	// DetailPlayed: the recipient played a voice note or video; it implies read.
	DetailPlayed = "played"
	// MaxDetail bounds a detail in UTF-8 bytes, so later values fit too.
	MaxDetail = 32
)

// SIM slot names.
const (
	SIM1 = "SIM1"
	SIM2 = "SIM2"
	// BothSIMs is a selected_sim value: the phone takes sends for either slot.
	BothSIMs = "BOTH"
)

// SIMSlots are the slot names, SIM1 first: a phone has no more slots.
func SIMSlots() [2]string { return [2]string{SIM1, SIM2} }

// IsSIMSlot reports whether s names a SIM slot.
func IsSIMSlot(s string) bool { return s == SIM1 || s == SIM2 }

// IsSelectedSIM reports whether s is a selected_sim value: a slot, or
// BothSIMs.
func IsSelectedSIM(s string) bool { return IsSIMSlot(s) || s == BothSIMs }

// Frame is one protocol message; FrameType is its "type" field.
type Frame interface{ FrameType() string }

// SIM describes one SIM slot of the phone.
type SIM struct {
	Slot        string `json:"slot"`
	Carrier     string `json:"carrier,omitempty"`
	PhoneNumber string `json:"phone_number,omitempty"`
}

// WhatsAppNumber is a WhatsApp account the phone can send from.
type WhatsAppNumber struct {
	Phone string `json:"phone"`
}

// IMessageHandle is an iMessage handle an agent can send from.
type IMessageHandle struct {
	Handle string `json:"handle"`
}

// Hello is the phone's first frame on every connection.
type Hello struct {
	Protocol    int              `json:"protocol"`
	AppVersion  string           `json:"app_version"`
	SelectedSIM string           `json:"selected_sim"`
	SIMs        []SIM            `json:"sims"`
	WhatsApp    []WhatsAppNumber `json:"whatsapp,omitempty"`
	IMessage    []IMessageHandle `json:"imessage,omitempty"`
	// Health is the phone's state as it connects (revision 1.7); a phone
	// that does not know it leaves it out and links as before.
	Health *Health `json:"health,omitempty"`
	// Jobs (revision 1.42) are the ids of the WhatsApp and iMessage jobs
	// the agent's journal holds with no report of theirs acknowledged
	// (status_ack) yet: every job it could still carry out or report. A
	// job the server handed to this registration and finds neither here
	// nor settled was lost with a link before the agent journaled it, and
	// goes to its number's holder at once (PROTOCOL.md section 16.1).
	// nil (absent) says nothing, as before 1.42; an empty list says the
	// agent holds none. At most MaxHelloJobs.
	Jobs []string `json:"jobs,omitzero"`
}

// MaxHelloJobs bounds hello.jobs: an agent that holds more such jobs
// leaves the field out (its handed jobs then wait as before 1.42).
const MaxHelloJobs = 1000

// Health is what a phone tells about itself: the hello's health object,
// and the periodic health frame (at most one per HealthInterval). Every
// field is optional; an absent one is unknown.
type Health struct {
	// Battery is the charge in percent, 0 to 100.
	Battery *int `json:"battery,omitempty"`
	// Charging says the phone is on a charger.
	Charging *bool `json:"charging,omitempty"`
	// Signal is the cellular signal strength in percent, 0 to 100 (Android's
	// level 0-4 times 25; ModemManager's signal quality as it is).
	Signal *int `json:"signal,omitempty"`
	// Network is the data network type in lower case, such as "lte", "nr",
	// "umts", "gsm" or "wifi"; at most MaxNetworkBytes.
	Network string `json:"network,omitempty"`
	// SIMs carries, per SIM, the operator it is registered with.
	SIMs []SIMHealth `json:"sims,omitempty"`
}

// SIMHealth is one SIM's part of a health report.
type SIMHealth struct {
	Slot     string `json:"slot"`
	Operator string `json:"operator,omitempty"`
}

// Health limits (PROTOCOL.md section 18).
const (
	// HealthIntervalSeconds is the shortest time between two health reports the
	// server stores: the state of a phone changes slowly, and a report a
	// minute is plenty for a device list and an alert.
	HealthIntervalSeconds = 60
	// MaxNetworkBytes bounds health.network.
	MaxNetworkBytes = 16
	// MaxOperatorBytes bounds health.sims[].operator, as a SIM's carrier.
	MaxOperatorBytes = 64
)

// Welcome answers hello: the link is up.
type Welcome struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	ServerTime        string `json:"server_time"`
	// PingIntervalSeconds is how often the server pings; a phone that hears
	// nothing (frame or ping) for twice as long treats the link as dead.
	// Read it through PingInterval, which bounds it.
	PingIntervalSeconds int `json:"ping_interval_seconds"`
	// MaxInflight is how many sends the server leaves un-acked at once.
	MaxInflight int `json:"max_inflight"`
	// SelectedSIM and DeviceName are the device's settings as stored now,
	// so a change made while the phone was offline reaches it on connect.
	SelectedSIM string `json:"selected_sim"`
	DeviceName  string `json:"device_name"`
}

// The ping interval a phone reads in welcome.ping_interval_seconds
// (PROTOCOL.md section 8.2): the one it assumes when the server names
// none, and the most it takes from a server.
const (
	DefaultPingIntervalSeconds = 45
	MaxPingIntervalSeconds     = 3600
)

// PingInterval is the server's ping interval as a phone times its liveness
// by (twice it without a frame or a ping, section 6): 45 s when the welcome
// names none (absent, 0 or negative), and at most an hour, however large
// the number a server sent: a hostile or broken one neither overflows the
// phone's time arithmetic (146 years, doubled, was a negative bound, and
// the link was taken for dead as soon as it was up) nor keeps a dead link
// up for good.
func (w Welcome) PingInterval() time.Duration {
	switch s := w.PingIntervalSeconds; {
	case s <= 0:
		return DefaultPingIntervalSeconds * time.Second
	case s > MaxPingIntervalSeconds:
		return MaxPingIntervalSeconds * time.Second
	default:
		return time.Duration(s) * time.Second
	}
}

// Send is a job for the phone: deliver one message.
type Send struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	To      string `json:"to"`
	Message string `json:"message"`
	SIMSlot string `json:"sim_slot,omitempty"`
	// From is the WhatsApp number or iMessage handle to send from (agent
	// channels only), as the agent announced it.
	From        string `json:"from,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	MediaURL    string `json:"media_url,omitempty"`
	ExpiresAt   string `json:"expires_at"`
}

// Ack says the phone took a send durably.
type Ack struct {
	ID string `json:"id"`
}

// Status reports what became of a send.
type Status struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Detail refines a delivered report of an agent channel (DetailRead,
	// DetailPlayed): WhatsApp tells more than "delivered", and a client
	// wants to know that the recipient saw the message.
	Detail string `json:"detail,omitempty"`
	At     string `json:"at"`
}

// StatusAck confirms a status was stored; the phone may forget it.
type StatusAck struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Detail echoes the status frame's detail: a delivered report and a
	// delivered report with a detail are two reports of one job, and the
	// phone must drop the one that was answered.
	Detail string `json:"detail,omitempty"`
}

// Inbound carries a message the phone received.
type Inbound struct {
	ClientID   string `json:"client_id"`
	Channel    string `json:"channel"`
	From       string `json:"from"`
	To         string `json:"to,omitempty"`
	Message    string `json:"message"`
	SIMSlot    string `json:"sim_slot,omitempty"`
	ReceivedAt string `json:"received_at"`
	// Media are the ids of the files an agent uploaded for a WhatsApp or
	// iMessage message (POST /device/media), in order; at most 10.
	Media []string `json:"media,omitempty"`
}

// InboundAck confirms an inbound message is stored; the phone may forget it.
type InboundAck struct {
	ClientID string `json:"client_id"`
	ID       uint64 `json:"id"`
	UUID     string `json:"uuid"`
}

// Config pushes a changed setting to the phone.
type Config struct {
	SelectedSIM string `json:"selected_sim"`
	DeviceName  string `json:"device_name,omitempty"`
	Status      string `json:"status,omitempty"`
}

// Error explains a refusal, usually right before a close. When it refuses a
// report, it names it: ID for an ack or status, ClientID for an inbound.
type Error struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	ID       string `json:"id,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Field    string `json:"field,omitempty"`
	// RetryAfter, when set, says the refusal is temporary: the phone keeps
	// the report and sends it again after this many seconds.
	RetryAfter int `json:"retry_after,omitempty"`
}

func (Hello) FrameType() string      { return TypeHello }
func (Welcome) FrameType() string    { return TypeWelcome }
func (Send) FrameType() string       { return TypeSend }
func (Ack) FrameType() string        { return TypeAck }
func (Status) FrameType() string     { return TypeStatus }
func (StatusAck) FrameType() string  { return TypeStatusAck }
func (Inbound) FrameType() string    { return TypeInbound }
func (InboundAck) FrameType() string { return TypeInboundAck }
func (Config) FrameType() string     { return TypeConfig }
func (Error) FrameType() string      { return TypeError }
func (Health) FrameType() string     { return TypeHealth }

// Encode returns the frame's JSON with its "type" field first.
//
// The frame is encoded as json.Marshal encodes it, by a pooled
// json.Encoder whose output goes straight into the frame's bytes: one
// allocation a frame, where Marshal's copy of its output was a second.
func Encode(f Frame) ([]byte, error) {
	e := frameEncoders.Get().(*frameEncoder)
	e.w.typ = f.FrameType()
	err := e.enc.Encode(f)
	out := e.w.out
	e.w.out, e.w.typ = nil, ""
	frameEncoders.Put(e)
	if err != nil {
		return nil, fmt.Errorf("androidproto: encode %s: %w", f.FrameType(), err)
	}
	return out, nil
}

// frameEncoder is a json.Encoder writing into a frameWriter, reused.
type frameEncoder struct {
	enc *json.Encoder
	w   frameWriter
}

var frameEncoders = sync.Pool{New: func() any {
	e := &frameEncoder{}
	e.enc = json.NewEncoder(&e.w)
	return e
}}

// frameWriter takes an Encoder's one write of a frame's JSON (an object
// and a newline) and makes the frame of it: the type first, then the
// object's members.
type frameWriter struct {
	typ string // the frame's type
	out []byte // the frame
}

func (w *frameWriter) Write(p []byte) (int, error) {
	body := p[:len(p)-1] // without the Encoder's newline
	out := make([]byte, 0, len(body)+len(w.typ)+12)
	out = append(out, `{"type":"`...)
	out = append(out, w.typ...)
	out = append(out, '"')
	if len(body) > 2 {
		out = append(out, ',')
	}
	w.out = append(out, body[1:]...)
	return len(p), nil
}

// ErrUnknownType is returned by Decode for a frame type this build does not
// know; peers ignore such frames, so that a newer peer can add types.
var ErrUnknownType = errors.New("androidproto: unknown frame type")

// Decode parses one frame. Unknown fields are ignored. The frame keeps
// nothing of data: the caller may reuse data once Decode returns.
func Decode(data []byte) (Frame, error) {
	// A phone's ack or status, most of the frames a server reads, written
	// with its type first as Encode writes it, is decoded in one pass
	// where other frames take two (the type, then the frame). Whatever
	// that pass does not take as exactly such a frame (another type named
	// later in the object, a member of the wrong kind, broken JSON) is
	// decoded as every other frame is, errors and all.
	if bytes.HasPrefix(data, ackPrefix) || bytes.HasPrefix(data, statusPrefix) {
		var r report
		if json.Unmarshal(data, &r) == nil {
			switch r.Type {
			case TypeAck:
				return &Ack{ID: r.ID}, nil
			case TypeStatus:
				return &Status{ID: r.ID, Status: r.Status, Error: r.Error, Detail: r.Detail, At: r.At}, nil
			}
		}
	}
	return decode(data)
}

var (
	ackPrefix    = []byte(`{"type":"` + TypeAck + `"`)
	statusPrefix = []byte(`{"type":"` + TypeStatus + `"`)
)

// report is an ack or a status frame with its type: the members of a
// Status (an Ack's one member among them) and the type, so that one
// decoding reads what decode's two read.
type report struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Detail string `json:"detail"`
	At     string `json:"at"`
}

// decode parses one frame: its type, then the frame of that type.
func decode(data []byte) (Frame, error) {
	var env struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("androidproto: not a JSON object: %w", err)
	}
	var f Frame
	switch env.Type {
	case TypeHello:
		f = &Hello{}
	case TypeWelcome:
		f = &Welcome{}
	case TypeSend:
		f = &Send{}
	case TypeAck:
		f = &Ack{}
	case TypeStatus:
		f = &Status{}
	case TypeStatusAck:
		f = &StatusAck{}
	case TypeInbound:
		f = &Inbound{}
	case TypeInboundAck:
		f = &InboundAck{}
	case TypeConfig:
		f = &Config{}
	case TypeError:
		f = &Error{}
	case TypeHealth:
		f = &Health{}
	case "":
		return nil, errors.New(`androidproto: frame without "type"`)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownType, env.Type)
	}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("androidproto: decode %s: %w", env.Type, err)
	}
	return f, nil
}
