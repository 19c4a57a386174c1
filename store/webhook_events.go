package store

import (
	"bytes"
	"encoding/json"
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

// OutboxAdd is what AddWebhookEvent did.
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

// StatusEvents builds the webhook deliveries of a status change. The store
// calls Build with the company's webhook set and the message as it now is;
// Build returns the event and one delivery per entry that takes it (none
// for a company that asked for no status events). It runs inside a write
// transaction: it must not call the store.
type StatusEvents struct {
	Limits OutboxLimits
	Build  func(set WebhookSet, m Message) (WebhookEvent, []WebhookDelivery, error)
	// Committed runs after a commit that queued or refused deliveries (a
	// refusal is an outbox over its limits): the dispatcher's wake-up and
	// the operator's log line.
	Committed func(m Message, res OutboxAdd)
}
