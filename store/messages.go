package store

import (
	"errors"
	"time"

	"github.com/simrelay/simrelay/window"
)

// Message directions and statuses.
const (
	Outbound = "outbound"
	Inbound  = "inbound"

	MsgQueued    = "queued"    // persisted, not yet taken by the phone
	MsgSending   = "sending"   // the phone acked the job
	MsgSent      = "sent"      // the phone's radio sent it
	MsgDelivered = "delivered" // the network reported delivery
	MsgFailed    = "failed"    // with Error
	MsgExpired   = "expired"   // not taken by the phone within its TTL
	MsgReceived  = "received"  // inbound
)

// Message is one SMS, either way.
type Message struct {
	ID        uint64 `json:"id"`
	UUID      string `json:"uuid"` // the queue id of an outbound message
	CompanyID uint64 `json:"company_id"`
	UserID    uint64 `json:"user_id,omitempty"` // who queued it
	// DeviceID is the id of the device registration the message belongs to;
	// with CompanyID it keys every index of the message.
	DeviceID uint64 `json:"device_id"`
	// Device is the device's fingerprint, kept for display only: a later
	// registration of the same handset may carry it too.
	Device    string `json:"device"`
	Direction string `json:"direction"`
	Channel   string `json:"channel"`
	Phone     string `json:"phone"` // the other party
	Text      string `json:"text"`
	SIMSlot   string `json:"sim_slot"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	Segments  int    `json:"segments"`
	// ClientID and ReceivedAt are the phone's id and time of an inbound message.
	ClientID   string    `json:"client_id,omitempty"`
	ReceivedAt string    `json:"received_at,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	// SendAt is when a scheduled message is due to be queued (schedule.go).
	SendAt time.Time `json:"send_at,omitzero"`
	// QueueSeq is its place in its device's queue when that is not its id
	// (a scheduled message queued at its time; see QueuePlace).
	QueueSeq uint64 `json:"queue_seq,omitempty"`
	// StatusAt is when the phone says the current status happened.
	StatusAt string `json:"status_at,omitempty"`
	// Detail is what an agent channel learned after the delivery (read,
	// played; status_detail.go).
	Detail string `json:"detail,omitempty"`
	// WhatsApp and iMessage (agent_messages.go): the number or handle the
	// message goes out from or came to (store id, public id and address),
	// and the content type and media of a send.
	NumberID    uint64 `json:"number_id,omitempty"`
	NumberRef   string `json:"number_ref,omitempty"`
	Account     string `json:"account,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	MediaURL    string `json:"media_url,omitempty"`
	// HandedTo is the registration a queued WhatsApp or iMessage send was
	// last handed to (AgentHandOut): while that registration lives, the
	// send goes to no other agent, even one that announced its number
	// since, and that registration's reports of it are taken. AgentPending
	// answers 0 for one since deleted.
	HandedTo uint64 `json:"handed_to,omitempty"`
	// Pool is the name of the sender pool a send named (pools.go), as the
	// pool spells it, and PoolID its id; the pool chose Device and SIMSlot.
	Pool   string `json:"pool,omitempty"`
	PoolID uint64 `json:"pool_id,omitempty"`
	// Attempts are the members a pool's message was queued on before a
	// failover moved it (failover.go), oldest first.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Media are the files of a received WhatsApp or iMessage message (media.go).
	Media []MediaRef `json:"media,omitempty"`
	// Window is when the message may go out (the send's, or its pool's);
	// HeldUntil, on a queued message, is the window's next opening while
	// the message waits for it outside its device's queue (schedule.go).
	Window    *window.Window `json:"window,omitempty"`
	HeldUntil time.Time      `json:"held_until,omitzero"`
	// ExpiresFixed says the send set ExpiresAt itself (expires_at): a
	// pool's window does not move it. Input only.
	ExpiresFixed bool `json:"-"`
	// Priority, 0 (the default) to MaxPriority, orders a device's queue:
	// a queued SMS above 0 waits in the priority queue, which links read
	// before the plain one (schedule.go).
	Priority int `json:"priority,omitempty"`
}

// WaitsUntil is when a queued message outside its window may next go, as
// the API's queue item and the console show it (held_until): HeldUntil
// once a link has held it, else, while it is still in its device's queue
// (its phone offline, or its link has not read it yet), its window's next
// opening after now. Zero for a message not queued, or one its window
// lets go now.
func (m Message) WaitsUntil(now time.Time) time.Time {
	switch {
	case m.Status != MsgQueued:
		return time.Time{}
	case !m.HeldUntil.IsZero():
		return m.HeldUntil
	case m.Window != nil:
		if next := m.Window.Next(now); next.After(now) {
			return next
		}
	}
	return time.Time{}
}

// Conversation is the running summary of one device's exchange with one number.
type Conversation struct {
	Phone         string    `json:"phone"`
	LastMessage   string    `json:"last_message"`
	LastMessageAt time.Time `json:"last_message_at"`
	Direction     string    `json:"direction"`
	MessageCount  int       `json:"message_count"`
	LastID        uint64    `json:"last_id"`
}

// ConversationsText bounds the text of one list of conversations
// (Conversations): the list ends with the conversation whose last message
// brings the texts to this many bytes, whatever its limit. A thousand
// conversations of ordinary texts hold a few hundred kilobytes, far below
// it; a thousand that each end with a long inbound text (10,000
// characters, up to 40 KB) held 40 MB, read whole into memory and written
// as one answer (80 MB, and over 500 MB of the server's memory, through
// the MCP tool list_conversations), as many at once as the rate limit lets
// a company ask. 4 MiB is what a page of history (100 messages) may hold.
const ConversationsText = 4 << 20

// Idempotent is the first answer to a request with an Idempotency-Key.
// Route and Digest are its key's (IdempotencyKey); answers kept before keys
// had them have neither.
type Idempotent struct {
	Status    int       `json:"status"`
	Body      []byte    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
	Route     string    `json:"route,omitempty"`
	Digest    string    `json:"digest,omitempty"`
}

// ErrDeviceGone is returned when a message names a device that does not
// exist (any more), and by DeviceCompany when the device is deleted or its
// company is closing or removed. It is the store's word that a device is
// gone: a phone is told so (close 4503, error not_found) on it alone,
// never on ErrNotFound, which may be a missing record of any kind.
var ErrDeviceGone = errors.New("store: device not found")

// ErrDeviceDisabled is returned when a message is queued for a disabled device.
var ErrDeviceDisabled = errors.New("store: device disabled")

// InboundQuery filters the inbound list; empty fields match all.
type InboundQuery struct {
	CompanyID uint64
	Device    string // the fingerprint of a live device of the company
	SIMSlot   string
	Limit     int
}

// Details of a delivered message (Message.Detail): what an agent channel
// learned after the delivery. They are not statuses: a detail changes no
// counter and writes no status event, since receivers count one event per
// status change (status_events.go).
const (
	DetailRead   = "read"
	DetailPlayed = "played"
)

// IdempotencyKey is a send request's Idempotency-Key with what it is bound
// to. A key is the company's and the route's: the same key on another route
// is another key. Digest identifies what the request asked, so that the
// caller can tell a retry (which gets the first answer again) from a reuse
// of the key for another request.
type IdempotencyKey struct {
	Key    string // the header's value; "" for none
	Route  string // the route, e.g. "/chat/send"
	Digest string // a hash of the request
}

// ExportPageText bounds the text of one page of a company's export
// (ConversationsAfter, CompanyMessagesAfter): the page ends with the
// conversation or message whose text brings the page's texts to this many
// bytes, whatever its limit. A page of 500 ordinary texts holds under
// 100 KB, far below it; 500 that each hold a long inbound text (10,000
// characters, up to 40 KB) held 20 MB, read whole into memory for each of
// the 16 exports a server runs at once.
const ExportPageText = 1 << 20

// ExportPageFull says whether a page of conversations that ConversationsAfter
// read for limit may have more after it: it holds limit conversations, or
// was ended by ExportPageText. Read on after its last one when it is.
func ExportPageFull(page []Conversation, limit int) bool {
	text := 0
	for _, c := range page {
		text += len(c.LastMessage)
	}
	return len(page) >= limit || text >= ExportPageText
}
