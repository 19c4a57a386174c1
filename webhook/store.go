package webhook

import (
	"time"

	"github.com/simrelay/simrelay/store"
)

// Store is what this package asks of the store; both backends answer it.
type Store interface {
	Company(id uint64) (store.Company, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	ClaimWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error)
	PruneWebhookAttempts(cutoff time.Time, keep int) (int, error)
	RecordWebhookAttemptLater(id uint64, keep int, decide func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt) store.AttemptRecord
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
	WebhookAttempts(companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error)
	WebhookJob(id uint64) (store.WebhookJob, error)
	WebhookSet(companyID uint64) (store.WebhookSet, error)
}
