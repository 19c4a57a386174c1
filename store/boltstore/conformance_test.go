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
	t.Run("Dispatch", func(t *testing.T) { t.Parallel(); conformance.Dispatch(t, openConformance[conformance.DispatchStore]) })
	t.Run("DispatchAgents", func(t *testing.T) {
		t.Parallel()
		conformance.DispatchAgents(t, openConformance[conformance.DispatchAgentsStore])
	})
	t.Run("Stats", func(t *testing.T) { t.Parallel(); conformance.Stats(t, openConformance[conformance.StatsStore]) })
	t.Run("StatsRegistrations", func(t *testing.T) {
		t.Parallel()
		conformance.StatsRegistrations(t, openConformance[conformance.StatsRegistrationsStore])
	})
	t.Run("Webhooks", func(t *testing.T) { t.Parallel(); conformance.Webhooks(t, openConformance[conformance.WebhooksStore]) })
	t.Run("Mail", func(t *testing.T) { t.Parallel(); conformance.Mail(t, openConformance[conformance.MailStore]) })
	t.Run("Media", func(t *testing.T) {
		t.Parallel()
		conformance.Media(t, openBudgeted[conformance.MediaStore](conformance.MediaBudget))
	})
	t.Run("MediaMessages", func(t *testing.T) {
		t.Parallel()
		conformance.MediaMessages(t, openBudgeted[conformance.MediaMessagesStore](conformance.MediaBudget))
	})
	t.Run("Billing", func(t *testing.T) { t.Parallel(); conformance.Billing(t, openConformance[conformance.BillingStore]) })
	t.Run("Agents", func(t *testing.T) { t.Parallel(); conformance.Agents(t, openConformance[conformance.AgentsStore]) })
	t.Run("AgentsBudget", func(t *testing.T) {
		t.Parallel()
		conformance.AgentsBudget(t, openBudgeted[conformance.AgentsStore](conformance.AgentsBudgetBytes))
	})
}
