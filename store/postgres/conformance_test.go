package postgres

import (
	"testing"

	"github.com/simrelay/simrelay/store/conformance"
)

// openConformance opens a store on a new database for one conformance case.
func openConformance[S any](t *testing.T) S {
	return any(openStore(t, Options{})).(S)
}

// TestConformance runs the suites of package conformance on PostgreSQL,
// each registered once this backend answers all of its methods.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("Billing", func(t *testing.T) { t.Parallel(); conformance.Billing(t, openConformance[conformance.BillingStore]) })
}
