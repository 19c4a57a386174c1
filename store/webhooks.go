package store

import (
	"time"
)

// Webhook delivery states: what a delivery is after an attempt, as the
// deliveries log shows it.
const (
	WebhookPending   = "pending"   // another attempt is scheduled
	WebhookDelivered = "delivered" // the receiver answered 2xx
	WebhookFailed    = "failed"    // given up
)

// WebhookEntry is one receiver in a company's webhook set.
type WebhookEntry struct {
	ID     uint64 `json:"id"`
	URL    string `json:"url"`
	Active bool   `json:"active"`
	// Scope; an empty list matches everything.
	Devices   []string  `json:"devices,omitempty"`
	SIMs      []int     `json:"sims,omitempty"` // 0 is SIM1, 1 is SIM2
	Channels  []string  `json:"channels,omitempty"`
	WANumbers []string  `json:"wa_numbers,omitempty"`
	IMHandles []string  `json:"im_handles,omitempty"`
	Events    []string  `json:"events,omitempty"` // empty: the inbound types only
	CreatedAt time.Time `json:"created_at"`
	// FailingSince is the first failed attempt since the last success; zero
	// while the receiver is healthy.
	FailingSince time.Time `json:"failing_since,omitzero"`
	// DisabledAt and DisabledReason record why delivery turned the entry off.
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
}

// WebhookSet is a company's webhook configuration: its entries and the secret
// that signs their deliveries.
type WebhookSet struct {
	CompanyID       uint64         `json:"company_id"`
	Secret          string         `json:"secret,omitempty"`
	SecretCreatedAt time.Time      `json:"secret_created_at,omitzero"`
	Entries         []WebhookEntry `json:"entries,omitempty"`
}

// Entry returns the entry with the id, nil when the set has none.
func (w *WebhookSet) Entry(id uint64) *WebhookEntry {
	for i := range w.Entries {
		if w.Entries[i].ID == id {
			return &w.Entries[i]
		}
	}
	return nil
}

// WebhookDelivery is one event on its way to one entry: a row of the outbox.
// It exists while it is pending; the deliveries log keeps its history.
type WebhookDelivery struct {
	ID        uint64 `json:"id"`
	UUID      string `json:"uuid"` // the body's id and X-Service-Delivery
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	CompanyID uint64 `json:"company_id"`
	WebhookID uint64 `json:"webhook_id"`
	// Body is what every attempt sends, fixed when the event is enqueued.
	// Stored rows leave it out: it is put together from the event's shared
	// body when the delivery is read for an attempt (rows written before
	// events were shared may still carry their own).
	Body          []byte    `json:"body,omitempty"`
	Attempts      int       `json:"attempts"`
	CreatedAt     time.Time `json:"created_at"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
}

// WebhookAttempt is one line of the deliveries log: one attempt at one delivery.
type WebhookAttempt struct {
	ID         uint64 `json:"id"`
	CompanyID  uint64 `json:"company_id"`
	WebhookID  uint64 `json:"webhook_id"`
	EventID    string `json:"event_id"`
	DeliveryID string `json:"delivery_id"`
	EventType  string `json:"event_type"`
	Attempt    int    `json:"attempt"`
	// State is the delivery's state after this attempt.
	State      string    `json:"state"`
	StatusCode int       `json:"status_code,omitempty"` // 0: no HTTP answer
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	CreatedAt  time.Time `json:"created_at"`
	// NextAttemptAt is set while the state is pending.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
}

// WebhookJob is a delivery with what its next attempt needs, read together.
type WebhookJob struct {
	Delivery WebhookDelivery
	Entry    *WebhookEntry // nil when the entry was removed
	Secret   string
}

// DueSkip is what a pass over the due deliveries (DueWebhookDeliveries,
// ClaimWebhookDeliveries) asks of each one, in due order: whether to take
// it, and when not, how much of what follows to pass over with it. A pass
// sees a company's deliveries, and an entry's, in due order; deliveries of
// different companies it may see in any order, and returns what it takes
// in due order all the same. nil takes every one.
type DueSkip func(d WebhookDue) DueVerdict

// DueVerdict is a DueSkip's answer.
type DueVerdict uint8

const (
	// DueTake takes the delivery.
	DueTake DueVerdict = iota
	// DuePass passes over this delivery only.
	DuePass
	// DuePassEntry passes over this delivery and every later one of its
	// entry in this pass: the entry has as many attempts under way as it
	// may. The store need not read them.
	DuePassEntry
	// DuePassCompany passes over this delivery and every later one of its
	// company in this pass: the company has as many under way as it may.
	DuePassCompany
)

// SkipIf is a DueSkip that passes over the deliveries skip names, one by
// one, and takes the others.
func SkipIf(skip func(d WebhookDue) bool) DueSkip {
	return func(d WebhookDue) DueVerdict {
		if skip(d) {
			return DuePass
		}
		return DueTake
	}
}

// WebhookDue names a due delivery, the entry it goes to and its company.
type WebhookDue struct {
	ID, WebhookID, CompanyID uint64
	// CompanyLeased is how many of the company's deliveries other nodes
	// held under a live lease when this one was claimed
	// (ClaimWebhookDeliveries on PostgreSQL), so that a per-company bound
	// holds across a cluster; always 0 on the embedded store.
	CompanyLeased int
	// EntryLeased is the same count for the delivery's entry, so that one
	// hanging entry leaves room for its company's other entries across a
	// cluster too; always 0 on the embedded store.
	EntryLeased int
}
