package web

import (
	"time"

	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/store"
)

// liveMessage is a message as the pages' JavaScript draws it.
type liveMessage struct {
	ID      uint64 `json:"id"`
	QueueID string `json:"queue_id,omitempty"`
	Device  string `json:"device"`
	Phone   string `json:"phone"`
	// PhoneDisplay is Phone formatted for reading (numplan.Display).
	PhoneDisplay string `json:"phone_display"`
	Direction    string `json:"direction"`
	Text         string `json:"text"`
	SIMSlot      string `json:"sim_slot"`
	Status       string `json:"status"`
	Error        string `json:"error,omitempty"`
	CreatedAt    string `json:"created_at"`
	// Channel is sms, whatsapp or imessage; NumberID names the WhatsApp
	// number or iMessage handle of the other two.
	Channel     string `json:"channel"`
	NumberID    string `json:"number_id,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	MediaURL    string `json:"media_url,omitempty"`
	// SendAt is when a scheduled SMS is due; HeldUntil when a queued one
	// that waits outside its sending window goes to its phone.
	SendAt    string `json:"send_at,omitempty"`
	HeldUntil string `json:"held_until,omitempty"`
	// Detail is what a delivered WhatsApp message's receipts added (read, played).
	Detail string `json:"detail,omitempty"`
	// Media are the files of a received WhatsApp or iMessage message.
	Media []liveFile `json:"media,omitempty"`
}

// liveOut is m as a tab draws it at now: a queued SMS outside its window
// shows when it may go (held_until) as the API's queue item does, whether
// or not a phone's link has held it yet.
func liveOut(m store.Message, now time.Time) liveMessage {
	out := liveMessage{ID: m.ID, Device: m.Device, Phone: m.Phone, PhoneDisplay: numplan.Display(m.Phone), Direction: m.Direction, Text: m.Text,
		SIMSlot: m.SIMSlot, Status: m.Status, Error: m.Error, CreatedAt: m.CreatedAt.UTC().Format(time.RFC3339),
		Channel: m.Channel, NumberID: m.NumberRef, ContentType: m.ContentType, MediaURL: m.MediaURL, Detail: m.Detail}
	if out.Channel == "" {
		out.Channel = "sms"
	}
	if !m.SendAt.IsZero() {
		out.SendAt = m.SendAt.UTC().Format(time.RFC3339)
	}
	if until := m.WaitsUntil(now); !until.IsZero() {
		out.HeldUntil = until.UTC().Format(time.RFC3339)
	}
	if m.Direction == store.Outbound {
		out.QueueID = m.UUID
	}
	if len(m.Media) > 0 {
		out.Media = liveFiles(m.Media)
	}
	return out
}
