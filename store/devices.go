package store

import (
	"errors"
	"time"
)

// Device status values.
const (
	DeviceActive   = "active"
	DeviceDisabled = "disabled"
)

// ErrPairingUsed is returned for a pairing code that was already spent.
var ErrPairingUsed = errors.New("store: pairing code already used")

// SIM is one SIM slot of a device.
type SIM struct {
	Slot        string `json:"slot"`
	Carrier     string `json:"carrier,omitempty"`
	PhoneNumber string `json:"phone_number,omitempty"`
}

// Device is a paired phone. The devices bucket finds the live one by its
// fingerprint (unique across companies while it lives); everything the
// device owns hangs off its company and ID (see devKey).
type Device struct {
	// ID is the store's id of this registration: kept by a re-registration
	// within the company, never reused after a delete.
	ID          uint64    `json:"id"`
	Fingerprint string    `json:"fingerprint"`
	CompanyID   uint64    `json:"company_id"`
	UserID      uint64    `json:"user_id"`
	Name        string    `json:"name"`
	Status      string    `json:"status"`
	SelectedSIM string    `json:"selected_sim"`
	SIMs        []SIM     `json:"sims"`
	FCMToken    string    `json:"fcm_token,omitempty"`
	AppVersion  string    `json:"app_version,omitempty"`
	TokenHash   []byte    `json:"token_hash"`
	CreatedAt   time.Time `json:"created_at"`
	LastSeenAt  time.Time `json:"last_seen_at,omitzero"`
	// SMSPerMinute paces sends to this phone; 0 leaves pacing to Android's own quota.
	SMSPerMinute int `json:"sms_per_minute,omitempty"`
	// Health is the phone's last health report and the alerts raised from
	// it; nil until the phone sends one. A pointer, so that a device without
	// it (and the copy a link keeps) costs one word.
	Health *DeviceHealth `json:"health,omitempty"`
	// NoNumbers says that the registration holds no WhatsApp number and
	// no iMessage handle. The write of its link's hello (UpdateDeviceWith)
	// reads the index of the numbers each registration holds when it is
	// unset, and stores what it found; AnnounceNumbers unsets it in the
	// transaction that gives the registration a number. So it is never set
	// while the registration holds one, and an SMS phone's hello, once
	// stored with it, reads nothing more: a hello that announces none lets
	// the numbers go (gateway) only when it is unset. A new registration
	// has it (a new id holds none), a registration of the fingerprint
	// again keeps it, and a record written before it existed reads the
	// index at its next hello.
	NoNumbers bool `json:"no_numbers,omitempty"`
}

// DeviceHealth is the newest health report of a phone (never a history,
// so its size is bounded by the report's own limits; ReportedAt is zero
// before the first), with the state of the alerts raised from it and from
// the phone's link.
type DeviceHealth struct {
	Battery    *int        `json:"battery,omitempty"`
	Charging   *bool       `json:"charging,omitempty"`
	Signal     *int        `json:"signal,omitempty"`
	Network    string      `json:"network,omitempty"`
	SIMs       []SIMHealth `json:"sims,omitempty"`
	ReportedAt time.Time   `json:"reported_at,omitzero"`
	// BatteryLow is set while the battery is under the low threshold and
	// device.battery_low was raised for this crossing.
	BatteryLow bool `json:"battery_low,omitempty"`
	// Presence is what the last device.online or device.offline said:
	// PresenceOnline, PresenceOffline, or "" before the first.
	Presence string `json:"presence,omitempty"`
	// OfflineMailAt is when the admins were last mailed that the phone is
	// offline: at most one such mail an hour.
	OfflineMailAt time.Time `json:"offline_mail_at,omitzero"`
}

// Presence values of DeviceHealth.
const (
	PresenceOnline  = "online"
	PresenceOffline = "offline"
)

// SIMHealth is one SIM's operator as the phone last reported it.
type SIMHealth struct {
	Slot     string `json:"slot"`
	Operator string `json:"operator,omitempty"`
}

// Pairing is a single-use code that lets a phone join a company. It is its
// maker's credential: removing the user who made it (DeleteUser), or for a
// code made with the API key (ViaAPIKey; UserID is then the company's first
// admin, whom the device it pairs belongs to) rotating the key
// (UpdateCompany with another APIKeyHash), deletes it unless a phone used it.
type Pairing struct {
	CompanyID uint64    `json:"company_id"`
	UserID    uint64    `json:"user_id"`
	ViaAPIKey bool      `json:"via_api_key,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
	UsedAt    time.Time `json:"used_at,omitzero"`
}

// MaxQueueDepth bounds what QueueDepth counts: a device list stays cheap
// (a walk over at most this many keys a device) whatever a backlog holds.
const MaxQueueDepth = 10000

// MaxDeviceFailures is how many of a device's last failures are kept.
const MaxDeviceFailures = 3

// DeviceFailure is one outbound message of a device that failed or expired.
type DeviceFailure struct {
	At      time.Time `json:"at"`
	Status  string    `json:"status"` // MsgFailed or MsgExpired
	Error   string    `json:"error,omitempty"`
	QueueID string    `json:"queue_id"`
	Channel string    `json:"channel,omitempty"`
}

// DeviceSummary is what a device list shows of a device beside its record,
// read for many devices at once (DeviceSummaries): one read for a page, not
// two per device.
type DeviceSummary struct {
	QueueDepth int             // SMS waiting for the phone, as QueueDepth counts them
	Failures   []DeviceFailure // its last failed or expired sends, newest first, as DeviceFailures
}
