package postgres

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// Every method the server asks of a store, PostgreSQL answers.
var _ store.Backend = (*Store)(nil)

// TestConformance runs every suite of package conformance on PostgreSQL.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.All(t, func(t *testing.T, budget int64) store.Backend {
		return openStore(t, Options{CompanyDailyStorage: budget})
	})
}

// TestConformanceTwoNodes runs the rules that hold across nodes with two
// stores (two pools) on one database.
func TestConformanceTwoNodes(t *testing.T) {
	t.Parallel()
	conformance.Nodes(t, func(t *testing.T, budget int64) (conformance.SendsStore, conformance.SendsStore) {
		url := migrated(t)
		opt := Options{CompanyDailyStorage: budget}
		return openURL(t, url, opt), openURL(t, url, opt)
	})
}

// TestWebhookClaims runs the webhook claims of two (or three) nodes, each a
// store (a pool) on one database.
func TestWebhookClaims(t *testing.T) {
	t.Parallel()
	conformance.WebhookClaims(t, func(t *testing.T) func(lease time.Duration) conformance.ClaimsStore {
		url := migrated(t)
		return func(lease time.Duration) conformance.ClaimsStore { return openURL(t, url, Options{Lease: lease}) }
	})
}
