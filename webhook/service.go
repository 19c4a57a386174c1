package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/wakeup"
)

// MaxLogLimit is the most lines one read of the deliveries log returns.
const MaxLogLimit = 100

// maxPerEntry is how many attempts one webhook entry may have under way at
// once, so that a receiver that hangs until the timeout cannot take every
// worker from the other entries (and companies). Config.entryBound lowers
// it to half the company's bound, so one hanging entry also leaves room for
// its company's other entries.
const maxPerEntry = 2

// Service is the webhook domain: configuration, outbox and delivery.
type Service struct {
	cfg    Config
	store  Store
	client *http.Client
	mailer Mailer // e-mail entries (email.go); set before serving
	log    *slog.Logger
	now    func() time.Time

	wake    *wakeup.Signal // a commit with new deliveries, or an attempt done, wakes the dispatcher
	running atomic.Bool

	mu       sync.Mutex
	busy     map[uint64]bool // deliveries handed to a worker and not yet recorded; guarded by mu
	perEntry map[uint64]int  // attempts under way per webhook entry; guarded by mu
	// perCompany is attempts under way per company; guarded by mu.
	perCompany map[uint64]int
}

// New returns the service; Run delivers.
func New(cfg Config, st Store, log *slog.Logger, now func() time.Time) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Service{
		cfg: cfg, store: st, client: NewClient(cfg), log: log, now: now,
		wake: wakeup.NewSignal(), busy: make(map[uint64]bool), perEntry: make(map[uint64]int), perCompany: make(map[uint64]int),
	}, nil
}

// Kick wakes the dispatcher to look for due deliveries now. It never blocks.
func (s *Service) Kick() { s.wake.Kick() }

// InboundEvents is the store's builder of inbound events
// (store.SetInboundEvents): inside the transaction that stores a new
// inbound message, the event's body once and one delivery for each active
// entry whose scope takes the message. Once that transaction commits, the
// dispatcher is woken. When the company's outbox is full the event's
// deliveries are logged as failed instead, and the operator log says so.
func (s *Service) InboundEvents() store.InboundEvents {
	return store.InboundEvents{
		Limits: s.outboxLimits(),
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			eventType, ok := eventTypes[m.Channel]
			if m.Direction != store.Inbound || !ok {
				return store.WebhookEvent{}, nil, nil
			}
			now := s.now().UTC() // due at once by the clock that dispatches it
			in := inboundOf(m)
			var ev store.WebhookEvent
			var out []store.WebhookDelivery
			for _, e := range set.Entries {
				if !e.Active || !Wants(e, eventType) || !Matches(e, in) {
					continue
				}
				if ev.ID == "" {
					body, err := eventBody(eventType, m, s.cfg.MediaURLs)
					if err != nil {
						return ev, nil, err
					}
					ev = store.WebhookEvent{ID: newID(), Body: body}
				}
				out = append(out, store.WebhookDelivery{
					UUID: newID(), EventType: eventType, WebhookID: e.ID, CreatedAt: now, NextAttemptAt: now,
				})
			}
			return ev, out, nil
		},
		Committed: func(m store.Message, res store.OutboxAdd) {
			if res.Queued > 0 {
				s.Kick()
			}
			if res.Refused > 0 {
				s.log.Warn("webhook outbox full: the event's deliveries are logged as failed, not queued",
					"company", m.CompanyID, "message", m.ID, "deliveries", res.Refused,
					"pending", res.Pending, "pending_bytes", res.PendingBytes,
					"max_pending", s.cfg.MaxPending, "max_pending_bytes", s.cfg.MaxPendingBytes)
			}
		},
	}
}

func (s *Service) outboxLimits() store.OutboxLimits {
	return store.OutboxLimits{MaxDeliveries: s.cfg.MaxPending, MaxBytes: s.cfg.MaxPendingBytes, LogKeep: s.cfg.LogKeep}
}

// Settings returns the company's webhook set, creating its signing secret on
// first use.
func (s *Service) Settings(_ context.Context, companyID uint64) (store.WebhookSet, error) {
	set, err := s.store.WebhookSet(companyID)
	if err != nil || set.Secret != "" {
		return set, err
	}
	return s.store.UpdateWebhookSet(companyID, s.now(), s.ensureSecret)
}

func (s *Service) ensureSecret(set *store.WebhookSet) error {
	if set.Secret != "" {
		return nil // another request created it first
	}
	secret, err := NewSecret()
	set.Secret, set.SecretCreatedAt = secret, s.now().UTC()
	return err
}

// RotateSecret gives the company a new signing secret and returns it. The old
// one stops signing at once, retries of earlier deliveries included.
func (s *Service) RotateSecret(_ context.Context, companyID uint64) (string, error) {
	set, err := s.store.UpdateWebhookSet(companyID, s.now(), func(set *store.WebhookSet) error {
		set.Secret = ""
		return s.ensureSecret(set)
	})
	return set.Secret, err
}

// Replace makes entries the company's whole webhook set. An entry with the id
// of a stored entry keeps it (and its health record while its URL and
// activity stay); the others get new ids. It returns the stored entries.
func (s *Service) Replace(_ context.Context, companyID uint64, entries []EntryInput) ([]store.WebhookEntry, error) {
	if entries == nil {
		return nil, problem.Invalid("webhooks", "is required: send the whole set, [] to remove every entry")
	}
	if len(entries) > MaxEntries {
		return nil, problem.Invalid("webhooks", fmt.Sprintf("must hold at most %d entries", MaxEntries))
	}
	// Numbers written without their + are read in the company's region
	// (validEntry); the company is read only when one is.
	var region string
	if scopeRegion(entries) {
		c, err := s.store.Company(companyID)
		if err != nil {
			return nil, err
		}
		region = c.Region
	}
	valid := make([]store.WebhookEntry, len(entries))
	for i, in := range entries {
		e, err := validEntry(in, fmt.Sprintf("webhooks[%d]", i), s.cfg.AllowPrivate, region)
		if err != nil {
			return nil, err
		}
		if isMailto(e.URL) {
			addr, err := s.companyAddress(companyID, mailtoAddress(e.URL))
			if err != nil {
				return nil, err
			}
			if addr == "" {
				return nil, problem.Invalid(fmt.Sprintf("webhooks[%d].url", i), "must be, for a mailto: address, the verified e-mail of a user of the company (an invitee once they accepted)")
			}
		}
		valid[i] = e
	}
	now := s.now().UTC()
	set, err := s.store.UpdateWebhookSet(companyID, now, func(set *store.WebhookSet) error {
		next := make([]store.WebhookEntry, len(valid))
		kept := map[uint64]bool{}
		for i, e := range valid {
			if id := entries[i].ID; id != nil {
				field := fmt.Sprintf("webhooks[%d].id", i)
				if *id <= 0 {
					return problem.Invalid(field, "is not one of this company's webhooks; leave it out for a new entry")
				}
				old := set.Entry(uint64(*id))
				if old == nil {
					return problem.Invalid(field, "is not one of this company's webhooks; leave it out for a new entry")
				}
				if kept[old.ID] {
					return problem.Invalid(field, "names an entry already listed")
				}
				kept[old.ID] = true
				e.ID, e.CreatedAt = old.ID, old.CreatedAt
				if e.Active && old.Active && e.URL == old.URL {
					e.FailingSince = old.FailingSince
				}
				if !e.Active && !old.Active {
					e.DisabledAt, e.DisabledReason = old.DisabledAt, old.DisabledReason
				}
			}
			next[i] = e
		}
		set.Entries = next
		return s.ensureSecret(set)
	})
	if err != nil {
		if pe, ok := problem.As(err); ok {
			return nil, pe
		}
		return nil, err
	}
	return set.Entries, nil
}

// Deliveries returns up to limit lines of the company's deliveries log,
// newest first; webhookID 0 means every entry.
func (s *Service) Deliveries(_ context.Context, companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error) {
	if limit < 1 || limit > MaxLogLimit {
		return nil, problem.OutOfRange("limit", 1, MaxLogLimit)
	}
	return s.store.WebhookAttempts(companyID, webhookID, limit)
}
