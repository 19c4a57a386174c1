package postgres

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// Every method the server asks of a store, PostgreSQL answers.
var _ store.Backend = (*Store)(nil)

// TestConformance runs every suite of package conformance on PostgreSQL,
// with batches of 2 rows (prunes, pool deletions) and 2 messages (device
// deletions): every prune and deletion of more than that, which the
// embedded store makes in one transaction, must agree with it.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.All(t, func(t *testing.T, budget int64) store.Backend {
		s := openStore(t, Options{CompanyDailyStorage: budget})
		s.pruneBatch, s.deviceBatch = 2, 2
		return s
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
	conformance.AgentNodes(t, func(t *testing.T) (conformance.AgentsStore, conformance.AgentsStore) {
		url := migrated(t)
		return openURL(t, url, Options{}), openURL(t, url, Options{})
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
