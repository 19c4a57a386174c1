package boltstore

import (
	"testing"

	"github.com/simrelay/simrelay/store/conformance"
)

// openConformance opens a new store for one conformance case.
func openConformance[S any](t *testing.T) S {
	s := open(t, t.TempDir())
	return any(s).(S)
}

// TestConformance runs every suite of package conformance on bbolt.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("Devices", func(t *testing.T) { t.Parallel(); conformance.Devices(t, openConformance[conformance.DevicesStore]) })
	t.Run("Billing", func(t *testing.T) { t.Parallel(); conformance.Billing(t, openConformance[conformance.BillingStore]) })
	t.Run("Agents", func(t *testing.T) { t.Parallel(); conformance.Agents(t, openConformance[conformance.AgentsStore]) })
}
