package store

import (
	"bytes"
	"encoding/json"
	"time"
)

// WebhookEvent is what every delivery of one event shares.
type WebhookEvent struct {
	ID string
	// Body is the JSON object every delivery sends, without the delivery's
	// id: a delivery sends it with "id":"<delivery uuid>" as first member
	// (see DeliveryBody).
	Body []byte
}

// DeliveryBody is the body a delivery sends: the event's body with the
// delivery's id as first member. It is what json.Marshal makes of a struct
// whose first field is that id and whose other fields marshal to event.
func DeliveryBody(deliveryID string, event []byte) []byte {
	id, _ := json.Marshal(deliveryID) // a string always marshals
	body := make([]byte, 0, len(event)+len(id)+7)
	body = append(append(body, `{"id":`...), id...)
	rest := bytes.TrimSpace(event)
	if len(rest) < 2 || rest[0] != '{' {
		return append(body, '}') // not an object: nothing to merge (never written by this package)
	}
	if inner := bytes.TrimSpace(rest[1:]); len(inner) > 0 && inner[0] != '}' {
		body = append(body, ',')
	}
	return append(body, rest[1:]...)
}

// OutboxLimits bound what one company's webhook outbox may hold, so that one
// tenant whose receivers fail (or who is flooded with inbound messages)
// cannot fill the disk the others share. Zero fields mean no limit.
type OutboxLimits struct {
	// MaxDeliveries is how many deliveries may be pending per company.
	MaxDeliveries int
	// MaxBytes is how many bytes of event bodies they may hold.
	MaxBytes int64
	// LogKeep is the deliveries log's length per company (see RecordWebhookAttempt).
	LogKeep int
}

// OutboxAdd is what the write of one event to the outbox did.
type OutboxAdd struct {
	// Queued is how many deliveries were stored.
	Queued int
	// Refused is how many were not, because the company's outbox is full;
	// each has a failed line in the deliveries log saying so.
	Refused int
	// Pending and PendingBytes are the company's outbox after the write.
	Pending      int
	PendingBytes int64
}

// The store writes the webhook events of a change in the transaction that
// stores the change, so the change and its outbox entries are durable
// together or not at all; a receiver is never told of a change that did
// not commit, and a committed change never loses its event. The webhook
// domain registers one builder per kind of change before the store serves
// (SetStatusEvents, SetInboundEvents, SetDeviceEvents); without one, that
// kind of change writes no event.
//
// For each change the store hands Build the company's webhook set (a
// company without entries costs one lookup and no call); Build returns the
// event and one delivery per entry that takes it, none when no entry does.
// Build runs inside the store's write transaction, which may run more than
// once: it must not call the store, and it only makes what it returns. The
// event's body counts against the company's daily storage budget after the
// fact: it is never refused for it (the change it belongs to was admitted).
// When the company's outbox would go over Limits, none of the event's
// deliveries is queued: each gets a failed line in the deliveries log
// instead (OutboxAdd.Refused). Committed runs once the transaction has
// committed, and only when the event queued or refused deliveries: the
// dispatcher's wake-up and the operator's log line. A Build error refuses
// the change with it.

// StatusEvents builds the webhook deliveries of an outbound message's
// change of status (a report of the phone or the agent, an expiry, a
// deletion of its device, a scheduled message failing at its time), given
// the message as it now is.
type StatusEvents struct {
	Limits    OutboxLimits
	Build     func(set WebhookSet, m Message) (WebhookEvent, []WebhookDelivery, error)
	Committed func(m Message, res OutboxAdd)
}

// InboundEvents builds the webhook deliveries of a new inbound message
// (StoreInbound, StoreAgentInbound), given the message as stored; a repeat
// of a stored message builds nothing. Its event counts on the day the
// message is stored.
type InboundEvents struct {
	Limits    OutboxLimits
	Build     func(set WebhookSet, m Message) (WebhookEvent, []WebhookDelivery, error)
	Committed func(m Message, res OutboxAdd)
}

// DeviceEvent is an event a change of a device raises (UpdateDeviceWith):
// its type, as the webhook outbox names it (device.online, ...), and when
// it happened, which is the day its event counts on.
type DeviceEvent struct {
	Type string
	At   time.Time
}

// DeviceEvents builds the webhook deliveries of the events a change of a
// device raises, one event at a time in the order raised, given the device
// as the change left it.
type DeviceEvents struct {
	Limits    OutboxLimits
	Build     func(set WebhookSet, d Device, ev DeviceEvent) (WebhookEvent, []WebhookDelivery, error)
	Committed func(d Device, ev DeviceEvent, res OutboxAdd)
}
