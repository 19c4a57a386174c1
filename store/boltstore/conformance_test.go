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

// openBudgeted opens a new store whose companies may add budget bytes a day.
func openBudgeted[S any](budget int64) conformance.Opener[S] {
	return func(t *testing.T) S {
		s, err := Open(t.TempDir(), Options{CompanyDailyStorage: budget})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return any(s).(S)
	}
}

// TestConformance runs every suite of package conformance on bbolt.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("Devices", func(t *testing.T) { t.Parallel(); conformance.Devices(t, openConformance[conformance.DevicesStore]) })
	t.Run("Accounts", func(t *testing.T) { t.Parallel(); conformance.Accounts(t, openConformance[conformance.AccountsStore]) })
	t.Run("InviteBudget", func(t *testing.T) {
		t.Parallel()
		conformance.InviteBudget(t, openBudgeted[conformance.AccountsStore](conformance.InviteBudgetBytes))
	})
	t.Run("DeviceSends", func(t *testing.T) {
		t.Parallel()
		conformance.DeviceSends(t, openConformance[conformance.DeviceSendsStore])
	})
	t.Run("Pools", func(t *testing.T) { t.Parallel(); conformance.Pools(t, openConformance[conformance.PoolsStore]) })
	t.Run("PoolSends", func(t *testing.T) {
		t.Parallel()
		conformance.PoolSends(t, openConformance[conformance.PoolSendsStore])
	})
	t.Run("Sends", func(t *testing.T) {
		t.Parallel()
		conformance.Sends(t, openConformance[conformance.SendsStore])
	})
	t.Run("SendBudget", func(t *testing.T) {
		t.Parallel()
		conformance.SendBudget(t, openBudgeted[conformance.SendsStore](conformance.SendBudgetBytes))
	})
	t.Run("SendsQueue", func(t *testing.T) {
		t.Parallel()
		conformance.SendsQueue(t, openConformance[conformance.SendsQueueStore])
	})
	t.Run("Events", func(t *testing.T) { t.Parallel(); conformance.Events(t, openConformance[conformance.EventsStore]) })
	t.Run("EventsBudget", func(t *testing.T) {
		t.Parallel()
		conformance.EventsBudget(t, openBudgeted[conformance.EventsStore](conformance.EventsBudgetBytes))
	})
}
