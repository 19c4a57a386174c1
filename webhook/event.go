package webhook

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
)

// Event types: the channel and what happened.
const (
	EventSMSReceived      = "sms.received"
	EventWhatsAppReceived = "whatsapp.received"
	EventIMessageReceived = "imessage.received"
)

var eventTypes = map[string]string{
	proto.ChannelSMS:      EventSMSReceived,
	proto.ChannelWhatsApp: EventWhatsAppReceived,
	proto.ChannelIMessage: EventIMessageReceived,
}

// Payload is the body of a delivery.
type Payload struct {
	ID        string      `json:"id"` // the delivery id, as X-Service-Delivery
	Type      string      `json:"type"`
	CreatedAt string      `json:"created_at"`
	Data      InboundData `json:"data"`
}

// InboundData is the inbound message of a *.received event: the spec's
// Inbound SMS fields, with the integer id and the uuid, plus the channel
// (and, for WhatsApp and iMessage, the number or handle it came to).
type InboundData struct {
	ID                uint64 `json:"id"`
	UUID              string `json:"uuid"`
	Phone             string `json:"phone"`
	Message           string `json:"message"`
	SIMSlot           string `json:"sim_slot,omitempty"`
	DeviceFingerprint string `json:"device_fingerprint"`
	ReceivedAt        string `json:"received_at"`
	Channel           string `json:"channel"`
	To                string `json:"to,omitempty"`
	// Media are the files of a WhatsApp or iMessage message, each with a
	// signed URL that works without a credential until url_expires_at.
	Media []MediaData `json:"media,omitempty"`
}

// MediaData is one file of an inbound message.
type MediaData struct {
	ID           string `json:"id"`
	ContentType  string `json:"content_type"`
	Size         int64  `json:"size"`
	Filename     string `json:"filename,omitempty"`
	URL          string `json:"url,omitempty"`
	URLExpiresAt string `json:"url_expires_at,omitempty"`
}

// MediaURLs signs the links of a payload's files (media.Service).
type MediaURLs interface {
	URL(id string) (string, time.Time)
}

// timeLayout is the contract's timestamp: RFC 3339, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

func inboundOf(m store.Message) Inbound {
	in := Inbound{Channel: m.Channel, Device: m.Device}
	if m.Channel == proto.ChannelSMS {
		in.SIMSlot = m.SIMSlot
	} else {
		in.Number, in.NumberID = m.Account, m.NumberRef
	}
	return in
}

// eventPayload is Payload without the delivery id: the part of the body
// every delivery of an event shares, stored once (store.DeliveryBody puts
// the id back in front, which gives the bytes json.Marshal makes of Payload).
type eventPayload struct {
	Type      string      `json:"type"`
	CreatedAt string      `json:"created_at"`
	Data      InboundData `json:"data"`
}

func eventBody(eventType string, m store.Message, urls MediaURLs) ([]byte, error) {
	d := InboundData{
		ID: m.ID, UUID: m.UUID, Phone: m.Phone, Message: m.Text, DeviceFingerprint: m.Device,
		ReceivedAt: m.ReceivedAt, Channel: m.Channel,
	}
	if m.Channel == proto.ChannelSMS {
		d.SIMSlot = m.SIMSlot
	} else {
		d.To = m.Account
	}
	for _, f := range m.Media {
		md := MediaData{ID: f.ID, ContentType: f.ContentType, Size: f.Size, Filename: f.Filename}
		if urls != nil {
			u, exp := urls.URL(f.ID)
			md.URL, md.URLExpiresAt = u, exp.UTC().Format(timeLayout)
		}
		d.Media = append(d.Media, md)
	}
	return json.Marshal(eventPayload{Type: eventType, CreatedAt: m.CreatedAt.UTC().Format(timeLayout), Data: d})
}

// newID returns a time-ordered UUID (version 7), as queue ids are.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
