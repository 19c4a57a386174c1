package webhook

import (
	"encoding/json"
	"fmt"
	"slices"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
)

// Outbound status events: opt-in per entry through its events list. The
// store writes them in the transaction of the status change (see
// store.StatusEvents); this file says which entries take one and what its
// body is.

// Status event types, one per status a receiver can act on.
const (
	EventMessageSent      = "message.sent"
	EventMessageDelivered = "message.delivered"
	EventMessageFailed    = "message.failed"
	EventMessageExpired   = "message.expired"
)

var statusEventTypes = map[string]string{
	store.MsgSent:      EventMessageSent,
	store.MsgDelivered: EventMessageDelivered,
	store.MsgFailed:    EventMessageFailed,
	store.MsgExpired:   EventMessageExpired,
}

// inboundEventTypes are what an entry without an events list gets, as
// the specification's entries always did.
var inboundEventTypes = []string{EventSMSReceived, EventWhatsAppReceived, EventIMessageReceived}

// checkEventType validates one value of an entry's events list.
func checkEventType(v string) (string, error) {
	if slices.Contains(inboundEventTypes, v) {
		return v, nil
	}
	for _, t := range statusEventTypes {
		if v == t {
			return v, nil
		}
	}
	if slices.Contains(deviceEventTypes, v) {
		return v, nil
	}
	return "", fmt.Errorf("must be an event type: sms.received, whatsapp.received, imessage.received, message.sent, message.delivered, message.failed, message.expired, device.online, device.offline or device.battery_low")
}

// Wants reports whether the entry takes events of the type: those its
// events list names, or the inbound types when the list is empty.
func Wants(e store.WebhookEntry, eventType string) bool {
	if len(e.Events) == 0 {
		return slices.Contains(inboundEventTypes, eventType)
	}
	return slices.Contains(e.Events, eventType)
}

// StatusData is the data of a message.* event. Fields that do not apply to
// the message's channel are null.
type StatusData struct {
	ID                uint64  `json:"id"`
	Channel           string  `json:"channel"`
	Status            string  `json:"status"`
	Error             *string `json:"error"`
	To                string  `json:"to"`
	DeviceFingerprint *string `json:"device_fingerprint"`
	SIMSlot           *string `json:"sim_slot"`
	QueueID           *string `json:"queue_id"`
	NumberID          *string `json:"number_id"`
	HandleID          *string `json:"handle_id"`
	UpdatedAt         string  `json:"updated_at"`
}

type statusPayload struct {
	Type      string     `json:"type"`
	CreatedAt string     `json:"created_at"`
	Data      StatusData `json:"data"`
}

func orNull(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func statusData(m store.Message) StatusData {
	ch := m.Channel
	if ch == "" {
		ch = proto.ChannelSMS
	}
	d := StatusData{
		ID: m.ID, Channel: ch, Status: m.Status, Error: orNull(m.Error), To: m.Phone,
		DeviceFingerprint: orNull(m.Device), QueueID: orNull(m.UUID), UpdatedAt: m.UpdatedAt.UTC().Format(timeLayout),
	}
	switch ch {
	case proto.ChannelSMS:
		d.SIMSlot = orNull(m.SIMSlot)
	case proto.ChannelWhatsApp:
		d.NumberID = orNull(m.NumberRef)
	case proto.ChannelIMessage:
		d.HandleID = orNull(m.NumberRef)
	}
	return d
}

// StatusEvents is the store's status event builder (store.SetStatusEvents):
// one event per status change, one delivery per active entry that asked for
// its type and whose scope takes the message.
func (s *Service) StatusEvents() store.StatusEvents {
	return store.StatusEvents{
		Limits: s.outboxLimits(),
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			eventType, ok := statusEventTypes[m.Status]
			if !ok {
				return store.WebhookEvent{}, nil, nil
			}
			in := inboundOf(m)
			if in.Channel == "" {
				in.Channel = proto.ChannelSMS
			}
			now := s.now().UTC()
			var ev store.WebhookEvent
			var out []store.WebhookDelivery
			for _, e := range set.Entries {
				if !e.Active || !Wants(e, eventType) || !Matches(e, in) {
					continue
				}
				if ev.ID == "" {
					body, err := json.Marshal(statusPayload{Type: eventType, CreatedAt: m.UpdatedAt.UTC().Format(timeLayout), Data: statusData(m)})
					if err != nil {
						return ev, nil, err
					}
					ev = store.WebhookEvent{ID: newID(), Body: body}
				}
				out = append(out, store.WebhookDelivery{UUID: newID(), EventType: eventType, WebhookID: e.ID, CreatedAt: now, NextAttemptAt: now})
			}
			return ev, out, nil
		},
		Committed: func(m store.Message, res store.OutboxAdd) {
			if res.Queued > 0 {
				s.Kick()
			}
			if res.Refused > 0 {
				s.log.Warn("webhook outbox full: the status event's deliveries are logged as failed, not queued",
					"company", m.CompanyID, "message", m.ID, "status", m.Status, "deliveries", res.Refused,
					"pending", res.Pending, "pending_bytes", res.PendingBytes)
			}
		},
	}
}
