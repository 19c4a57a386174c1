package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// AbandonedSignupRecordsStore is what AbandonedSignupRecords needs.
type AbandonedSignupRecordsStore interface {
	AccountsStore
	AddOptOut(companyID uint64, phone string, now time.Time) (o store.OptOut, created bool, err error)
	PutPool(companyID, id uint64, now time.Time, edit func(cur store.Pool) (store.PoolInput, error)) (store.Pool, error)
	UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error)
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
	AppendCompanyMail(m *store.Mail, lim store.MailLimits) error
}

// AbandonedSignupRecords: a sign-up that reads as abandoned by its users
// and key but holds one record of another kind (an opt-out, a pool, a
// plan with a Stripe customer, a webhook set, a pairing code no phone used
// yet, a pending mail of its own)
// is kept.
func AbandonedSignupRecords(t *testing.T, s AbandonedSignupRecordsStore) {
	now := T0.Add(30 * 24 * time.Hour)
	cutoff := now.Add(-8 * 24 * time.Hour)
	old := cutoff.Add(-time.Hour)
	kinds := map[string]func(c store.Company) error{
		"opt-out": func(c store.Company) error {
			_, _, err := s.AddOptOut(c.ID, "+15550100001", old)
			return err
		},
		"pool": func(c store.Company) error {
			_, err := s.PutPool(c.ID, 0, old, func(store.Pool) (store.PoolInput, error) {
				return store.PoolInput{Name: "p", Strategy: "round_robin"}, nil
			})
			return err
		},
		"plan": func(c store.Company) error {
			_, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
				sub.PlanID, sub.Status, sub.CustomerID = "pro", "active", fmt.Sprintf("cus_%d", unique())
				return nil
			})
			return err
		},
		"webhook set": func(c store.Company) error {
			_, err := s.UpdateWebhookSet(c.ID, old, func(w *store.WebhookSet) error {
				w.Secret, w.SecretCreatedAt = "whsec", old
				return nil
			})
			return err
		},
		"pairing code": func(c store.Company) error {
			code := []byte(fmt.Sprintf("abandoned-pairing-%d", unique()))
			return s.PutPairing(code, store.Pairing{CompanyID: c.ID, ViaAPIKey: true, ExpiresAt: now.Add(time.Hour)}, old)
		},
		"pending mail": func(c store.Company) error {
			m := store.Mail{CompanyID: c.ID, To: "ops@example.com", Subject: "s", Text: "t", State: "pending", CreatedAt: old}
			return s.AppendCompanyMail(&m, store.MailLimits{MaxPending: 10, MaxBytes: 1 << 20})
		},
	}
	companies := map[string]store.Company{}
	for what, add := range kinds {
		c, _, _ := Signup(t, s, fmt.Sprintf("records-%d@example.com", unique()), old.Add(-24*time.Hour))
		if err := add(c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		companies[what] = c
	}
	if n := pruneAllSignups(t, s, cutoff, now, 1000); n != 0 {
		t.Errorf("removed %d sign-ups, want 0", n)
	}
	for what, c := range companies {
		if _, err := s.Company(c.ID); err != nil {
			t.Errorf("the company with a %s: %v, want it kept", what, err)
		}
	}
}
