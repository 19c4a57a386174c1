package conformance

import (
	"testing"

	"github.com/simrelay/simrelay/store"
)

// All runs every suite on one backend, each case on a store of its own:
// open gives a new, empty store whose companies may add budget bytes a day
// (0: no budget). Both backends call it, so neither can skip a suite.
func All(t *testing.T, open func(t *testing.T, budget int64) store.Backend) {
	t.Run("Closed", func(t *testing.T) {
		t.Parallel()
		Closed(t, func(t *testing.T) ClosedStore { return open(t, 0) })
	})
	t.Run("Devices", func(t *testing.T) {
		t.Parallel()
		Devices(t, func(t *testing.T) DevicesStore { return open(t, 0) })
	})
	t.Run("Accounts", func(t *testing.T) {
		t.Parallel()
		Accounts(t, func(t *testing.T) AccountsStore { return open(t, 0) })
	})
	t.Run("Events", func(t *testing.T) {
		t.Parallel()
		Events(t, func(t *testing.T) EventsStore { return open(t, 0) })
	})
	t.Run("EventsBudget", func(t *testing.T) {
		t.Parallel()
		EventsBudget(t, func(t *testing.T) EventsStore { return open(t, EventsBudgetBytes) })
	})
	t.Run("InviteBudget", func(t *testing.T) {
		t.Parallel()
		InviteBudget(t, func(t *testing.T) AccountsStore { return open(t, InviteBudgetBytes) })
	})
	t.Run("DeviceSends", func(t *testing.T) {
		t.Parallel()
		DeviceSends(t, func(t *testing.T) DeviceSendsStore { return open(t, 0) })
	})
	t.Run("DeviceSummaries", func(t *testing.T) {
		t.Parallel()
		DeviceSummaries(t, func(t *testing.T) DeviceSummariesStore { return open(t, 0) })
	})
	t.Run("Pools", func(t *testing.T) {
		t.Parallel()
		Pools(t, func(t *testing.T) PoolsStore { return open(t, 0) })
	})
	t.Run("PoolSends", func(t *testing.T) {
		t.Parallel()
		PoolSends(t, func(t *testing.T) PoolSendsStore { return open(t, 0) })
	})
	t.Run("Sends", func(t *testing.T) {
		t.Parallel()
		Sends(t, func(t *testing.T) SendsStore { return open(t, 0) })
	})
	t.Run("SendBudget", func(t *testing.T) {
		t.Parallel()
		SendBudget(t, func(t *testing.T) SendsStore { return open(t, SendBudgetBytes) })
	})
	t.Run("SendsQueue", func(t *testing.T) {
		t.Parallel()
		SendsQueue(t, func(t *testing.T) SendsQueueStore { return open(t, 0) })
	})
	t.Run("Dispatch", func(t *testing.T) {
		t.Parallel()
		Dispatch(t, func(t *testing.T) DispatchStore { return open(t, 0) })
	})
	t.Run("DispatchAgents", func(t *testing.T) {
		t.Parallel()
		DispatchAgents(t, func(t *testing.T) DispatchAgentsStore { return open(t, 0) })
	})
	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		Stats(t, func(t *testing.T) StatsStore { return open(t, 0) })
	})
	t.Run("StatsRegistrations", func(t *testing.T) {
		t.Parallel()
		StatsRegistrations(t, func(t *testing.T) StatsRegistrationsStore { return open(t, 0) })
	})
	t.Run("Webhooks", func(t *testing.T) {
		t.Parallel()
		Webhooks(t, func(t *testing.T) WebhooksStore { return open(t, 0) })
	})
	t.Run("Mail", func(t *testing.T) {
		t.Parallel()
		Mail(t, func(t *testing.T) MailStore { return open(t, 0) })
	})
	t.Run("Media", func(t *testing.T) {
		t.Parallel()
		Media(t, func(t *testing.T) MediaStore { return open(t, MediaBudget) })
	})
	t.Run("MediaMessages", func(t *testing.T) {
		t.Parallel()
		MediaMessages(t, func(t *testing.T) MediaMessagesStore { return open(t, MediaBudget) })
	})
	t.Run("Billing", func(t *testing.T) {
		t.Parallel()
		Billing(t, func(t *testing.T) BillingStore { return open(t, 0) })
	})
	t.Run("Agents", func(t *testing.T) {
		t.Parallel()
		Agents(t, func(t *testing.T) AgentsStore { return open(t, 0) })
	})
	t.Run("CompanyRemoval", func(t *testing.T) {
		t.Parallel()
		CompanyRemoval(t, func(t *testing.T) RemovalStore { return open(t, 0) })
	})
	t.Run("AgentsBudget", func(t *testing.T) {
		t.Parallel()
		AgentsBudget(t, func(t *testing.T) AgentsStore { return open(t, AgentsBudgetBytes) })
	})
}
