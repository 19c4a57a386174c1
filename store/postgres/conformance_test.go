package postgres

import (
	"testing"

	"github.com/simrelay/simrelay/store/conformance"
)

// openConformance opens a store on a new database for one conformance case.
func openConformance[S any](t *testing.T) S {
	return any(openStore(t, Options{})).(S)
}

// openBudgeted opens a store on a new database whose companies may add
// budget bytes a day.
func openBudgeted[S any](budget int64) conformance.Opener[S] {
	return func(t *testing.T) S { return any(openStore(t, Options{CompanyDailyStorage: budget})).(S) }
}

// TestConformance runs the suites of package conformance on PostgreSQL,
// each registered once this backend answers all of its methods.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("Sends", func(t *testing.T) {
		t.Parallel()
		conformance.Sends(t, openConformance[conformance.SendsStore])
	})
	t.Run("SendBudget", func(t *testing.T) {
		t.Parallel()
		conformance.SendBudget(t, openBudgeted[conformance.SendsStore](conformance.SendBudgetBytes))
	})
}
