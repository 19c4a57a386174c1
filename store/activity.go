package store

import (
	"time"
)

// ActivityKeep is how many events a company's ring holds: a few pages of the
// dashboard's newest 10, bounded so a busy company writes in place.
const ActivityKeep = 50

// Activity types.
const (
	ActMessageSent      = "message.sent"
	ActMessageDelivered = "message.delivered"
	ActMessageFailed    = "message.failed"
	ActMessageExpired   = "message.expired"
	ActMessageReceived  = "message.received"
	ActDevicePaired     = "device.paired"
	ActDeviceDeleted    = "device.deleted"
	ActUserInvited      = "user.invited"
	ActAPIKeyRotated    = "api_key.rotated"
	ActWebhookDisabled  = "webhook.disabled"
)

// Activity is one event of a company's recent activity.
type Activity struct {
	Type        string    `json:"type"`
	At          time.Time `json:"at"`
	Description string    `json:"description"`
}
