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

// openBudgeted opens a new store with the media suites' daily storage budget.
func openBudgeted[S any](t *testing.T) S {
	s, err := Open(t.TempDir(), Options{CompanyDailyStorage: conformance.MediaBudget})
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
	t.Run("Webhooks", func(t *testing.T) { t.Parallel(); conformance.Webhooks(t, openConformance[conformance.WebhooksStore]) })
	t.Run("Mail", func(t *testing.T) { t.Parallel(); conformance.Mail(t, openConformance[conformance.MailStore]) })
	t.Run("Media", func(t *testing.T) { t.Parallel(); conformance.Media(t, openBudgeted[conformance.MediaStore]) })
	t.Run("MediaMessages", func(t *testing.T) {
		t.Parallel()
		conformance.MediaMessages(t, openBudgeted[conformance.MediaMessagesStore])
	})
}
