package store

import (
	"time"

	"github.com/simrelay/simrelay/internal/bidi"
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

// MaskPhone shows a number's country code and first digits only: enough to
// recognise it on a dashboard, not to read it off a screen.
func MaskPhone(p string) string {
	if len(p) <= 5 {
		return p
	}
	return p[:5] + "…"
}

// DeviceLabel is how activity names a device: its name, else its fingerprint.
func DeviceLabel(d Device) string {
	if d.Name != "" {
		return d.Name
	}
	return d.Fingerprint
}

// ChannelLabel is how activity names a message of the channel.
func ChannelLabel(ch string) string {
	switch ch {
	case "whatsapp":
		return "WhatsApp message"
	case "imessage":
		return "iMessage"
	}
	return "SMS"
}

// InviteActivity is the event of u's invitation; inviter is the address of
// the user who invited (u.InvitedBy), "" when there is none or it could
// not be read.
func InviteActivity(u User, inviter string) Activity {
	d := ActivityName(u.Email) + " invited as " + u.Role
	if inviter != "" {
		d += " by " + ActivityName(inviter)
	}
	return Activity{Type: ActUserInvited, At: u.CreatedAt, Description: d}
}

// MessageActivity is the event of an outbound message reaching status; device may be empty.
func MessageActivity(m Message, status, device string, at time.Time) (Activity, bool) {
	what := ChannelLabel(m.Channel) + " to " + MaskPhone(m.Phone)
	via := ""
	if device != "" {
		via = " via " + ActivityName(device)
	}
	switch status {
	case MsgSent:
		return Activity{Type: ActMessageSent, At: at, Description: what + " sent" + via}, true
	case MsgDelivered:
		return Activity{Type: ActMessageDelivered, At: at, Description: what + " delivered" + via}, true
	case MsgFailed:
		return Activity{Type: ActMessageFailed, At: at, Description: what + " failed" + via}, true
	case MsgExpired:
		return Activity{Type: ActMessageExpired, At: at, Description: what + " expired before a phone took it"}, true
	}
	return Activity{}, false
}

// ActivityName is a name (a device's label, a user's e-mail) as an activity
// line says it: isolated (U+2068...U+2069) when it holds right-to-left
// letters or directional controls, so that it cannot reorder the rest of the
// line ("Device X paired") wherever the line is shown as plain text. Other
// names are written as they are. The reports' device_name stays DeviceLabel,
// as written.
func ActivityName(label string) string { return bidi.Isolate(label) }
