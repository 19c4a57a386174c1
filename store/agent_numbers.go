package store

import (
	"errors"
	"time"

	"github.com/simrelay/simrelay/internal/base62"
)

// Number channels, as in Message.Channel.
const (
	ChannelNameWhatsApp = "whatsapp"
	ChannelNameIMessage = "imessage"
)

// Number statuses.
const (
	NumberActive = "active"
	NumberPaused = "paused"
)

// AgentNumber is a WhatsApp number or an iMessage handle of a company.
type AgentNumber struct {
	// ID is the store's own id (never shown); PublicID the wa_/im_ id clients use.
	ID        uint64 `json:"id"`
	PublicID  string `json:"public_id"`
	CompanyID uint64 `json:"company_id"`
	Channel   string `json:"channel"`
	// Address is the E.164 number, or the lower-cased e-mail of an iMessage handle.
	Address string `json:"address"`
	// FirstSeen starts the warm-up.
	FirstSeen time.Time `json:"first_seen"`
	// DeviceID and Device (fingerprint) are the registration holding the number.
	DeviceID uint64     `json:"device_id"`
	Device   string     `json:"device"`
	Status   string     `json:"status"`
	Caps     NumberCaps `json:"caps,omitzero"`
	// GapMin and GapMax override the gap between dispatches when GapMax > 0.
	GapMin    time.Duration `json:"gap_min,omitempty"`
	GapMax    time.Duration `json:"gap_max,omitempty"`
	UpdatedAt time.Time     `json:"updated_at"`
	// LastTakenAt is when an agent last acked one of the number's jobs: after
	// a restart the gap between dispatches counts from it.
	LastTakenAt time.Time `json:"last_taken_at,omitzero"`
}

// NumberCaps are a number's own caps; 0 keeps the server's default.
type NumberCaps struct {
	PerMinute int `json:"per_minute,omitempty"`
	PerHour   int `json:"per_hour,omitempty"`
	PerDay    int `json:"per_day,omitempty"`
}

// IsAgentChannel says whether a message channel goes through agent numbers.
func IsAgentChannel(channel string) bool {
	return channel == ChannelNameWhatsApp || channel == ChannelNameIMessage
}

// MayReport says whether the device registration deviceID may report (ack,
// status) the outbound message m, of its company; both stores ask it. An
// SMS is reported by the device it is queued on. A WhatsApp or iMessage
// job goes to one agent only (PROTOCOL.md section 16.1): once handed out
// (m.HandedTo), it is reported by that agent alone, whether it still holds
// the number or not, never by the number's holder now; a job handed out is
// that agent's from its ack on (m.DeviceID follows). A job with no hand-out
// recorded (one a server before the record wrote to its agent) is reported
// by the agent it was queued for or by the number's holder, which holder
// gives (0: none; asked only then).
func MayReport(m Message, deviceID uint64, holder func() uint64) bool {
	switch {
	case !IsAgentChannel(m.Channel) || m.NumberID == 0:
		return m.DeviceID == deviceID
	case m.HandedTo != 0:
		return m.HandedTo == deviceID
	default:
		return m.DeviceID == deviceID || holder() == deviceID
	}
}

// ErrTooManyNumbers refuses a new number past the company's limit.
var ErrTooManyNumbers = errors.New("store: the company has as many numbers as it may")

// TooManyNumbersError is ErrTooManyNumbers naming the channel whose limit
// refused an announcement (AnnounceAgentNumbers).
type TooManyNumbersError struct{ Channel string }

func (e *TooManyNumbersError) Error() string {
	return ErrTooManyNumbers.Error() + " of channel " + e.Channel
}

// Unwrap makes it ErrTooManyNumbers to errors.Is.
func (e *TooManyNumbersError) Unwrap() error { return ErrTooManyNumbers }

// Announced is what an agent's hello announces of one channel: its
// numbers or handles (already normalised), each once; none lets go those
// the device held (AnnounceAgentNumbers).
type Announced struct {
	Channel   string
	Addresses []string
}

// ErrNumberPaused refuses a send through a paused number.
var ErrNumberPaused = errors.New("store: the number is paused")

// ErrNumberNotHeld refuses an agent's inbound message on a number or handle
// of the company that another agent holds (announced it last).
var ErrNumberNotHeld = errors.New("store: the number is held by another agent")

// SendVet decides, inside the send's transaction, whether the number may
// take one more send: history lists its accepted sends since a time (for a
// governor that has not seen the number yet). A refusal is its error; on
// acceptance, undo gives the slot back if the send is not stored after all.
type SendVet func(n AgentNumber, history func(since time.Time) []time.Time) (undo func(), err error)

// numberPrefix is the id prefix of a channel's public ids.
func numberPrefix(channel string) string {
	if channel == ChannelNameIMessage {
		return "im_"
	}
	return "wa_"
}

// NewNumberPublicID is a new AgentNumber.PublicID of channel, as both
// backends give one: the channel's prefix (wa_, im_) and 20 random base62
// characters, each as likely as another (base62.Random); nothing in it
// comes from the number, the company or another company's records.
func NewNumberPublicID(channel string) (string, error) {
	s, err := base62.Random(20)
	if err != nil {
		return "", err
	}
	return numberPrefix(channel) + s, nil
}

// ChangeAgentNumber is n changed by fn, as UpdateAgentNumber changes a
// number in both backends, and whether fn changed it: a changed number's
// UpdatedAt is now, to be stored; a change that changes nothing leaves
// the number, updated_at included, as it was, and nothing to store.
func ChangeAgentNumber(n AgentNumber, now time.Time, fn func(*AgentNumber) error) (AgentNumber, bool, error) {
	was := n
	if err := fn(&n); err != nil {
		return was, false, err
	}
	if n == was {
		return n, false, nil
	}
	n.UpdatedAt = now.UTC()
	return n, true, nil
}
