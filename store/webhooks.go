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
	// Closing says the delivery's company is marked closing
	// (MarkCompanyClosing) or no longer stored: a delivery its removal
	// has not taken yet, which is sent no more. Such a job carries the
	// delivery as stored, without its body, entry or secret.
	Closing bool
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

// DueScan is one pass over the due deliveries as both stores run it: it
// asks Skip of each delivery seen, keeps what it takes (Due, up to Limit;
// Full once one more was due) and the companies and entries Skip said are
// full. A store reads in due order first (Walked) and, once the pass has
// passed over DueWalkPast deliveries of full companies and entries, goes on
// through its index by company and entry (ByEntry), leaving those out: a
// company whose receivers hang with a backlog of thousands costs no more
// reads, and a pass over many entries each with a few due reads only what
// it hands out (read by entry from the start, it read every entry).
type DueScan struct {
	Limit int
	Note  func(d *WebhookDue) // fills each delivery seen before Skip is asked; nil: nothing
	Skip  DueSkip             // nil takes every one
	Due   []WebhookDue
	Full  bool // more were due than Limit

	companies, entries map[uint64]bool // full: every later delivery passed over
	past               int             // deliveries of full ones the walk passed over
}

// DueWalkPast is how many deliveries of full companies and entries a pass
// walks over in due order before it reads by entry instead.
const DueWalkPast = 128

// Passed says whether the company or the entry is full in this pass.
func (p *DueScan) Passed(companyID, webhookID uint64) bool {
	return p.companies[companyID] || p.entries[webhookID]
}

// CompanyPassed says whether the company is full in this pass: a read by
// entry passes over all its entries at once.
func (p *DueScan) CompanyPassed(companyID uint64) bool { return p.companies[companyID] }

// See asks Skip about d, due and not Passed; it returns false once the
// pass is Full.
func (p *DueScan) See(d WebhookDue) bool {
	if p.Note != nil {
		p.Note(&d)
	}
	verdict := DueTake
	if p.Skip != nil {
		verdict = p.Skip(d)
	}
	switch verdict {
	case DueTake:
		if len(p.Due) == p.Limit {
			p.Full = true
			return false
		}
		p.Due = append(p.Due, d)
	case DuePassCompany:
		if p.companies == nil {
			p.companies = map[uint64]bool{}
		}
		p.companies[d.CompanyID] = true
	case DuePassEntry:
		if p.entries == nil {
			p.entries = map[uint64]bool{}
		}
		p.entries[d.WebhookID] = true
	}
	return true
}

// Walked is See for a pass reading in due order: a delivery of a full
// company or entry is counted instead. It returns false when the walk
// stops there: the pass is Full, or ByEntry.
func (p *DueScan) Walked(d WebhookDue) bool {
	if p.Passed(d.CompanyID, d.WebhookID) {
		p.past++
		return !p.ByEntry()
	}
	return p.See(d)
}

// ByEntry says whether the walk passed over enough of full companies and
// entries for the pass to go on by entry.
func (p *DueScan) ByEntry() bool { return !p.Full && p.past >= DueWalkPast }

// PassedIDs lists the companies and the entries Skip said are full.
func (p *DueScan) PassedIDs() (companies, entries []uint64) {
	for c := range p.companies {
		companies = append(companies, c)
	}
	for e := range p.entries {
		entries = append(entries, e)
	}
	return companies, entries
}

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
