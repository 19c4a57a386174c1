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

// openBudgeted opens a new store with a daily storage budget per company.
func openBudgeted[S any](t *testing.T, dailyStorage int64) S {
	s, err := Open(t.TempDir(), Options{CompanyDailyStorage: dailyStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return any(s).(S)
}

// TestConformance runs every suite of package conformance on bbolt.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("Devices", func(t *testing.T) { t.Parallel(); conformance.Devices(t, openConformance[conformance.DevicesStore]) })
	t.Run("Sends", func(t *testing.T) {
		t.Parallel()
		conformance.Sends(t, openConformance[conformance.SendsStore], openBudgeted[conformance.SendsStore])
	})
	t.Run("SendsQueue", func(t *testing.T) {
		t.Parallel()
		conformance.SendsQueue(t, openConformance[conformance.SendsQueueStore])
	})
}
