package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// TwoNodes opens two handles on one new store, as two nodes of a cluster
// open one database (two pools), each with the daily storage budget given
// (0: none). Only a store that several processes may share (the PostgreSQL
// one) runs the suite.
type TwoNodes func(t *testing.T, budget int64) (a, b SendsStore)

// Nodes runs the rules that must hold across the nodes of a cluster as on
// one (contract section 12): the plan's limits and the storage budget count
// every node's sends, whichever node takes them.
func Nodes(t *testing.T, open TwoNodes) {
	t.Run("PlanLimitRace", func(t *testing.T) { t.Parallel(); nodesPlanLimitRace(t, open) })
	t.Run("Budget", func(t *testing.T) { t.Parallel(); nodesBudget(t, open) })
}

// nodesPlanLimitRace: sends racing for the last of the plan's messages
// through two nodes at once are counted exactly: as many are stored as the
// plan allows, and both nodes read the same usage.
func nodesPlanLimitRace(t *testing.T, open TwoNodes) {
	const limit, senders = 10, 40
	a, b := open(t, 0)
	a.SetPlans(messagePlan(limit)) // each node reads its plans from its own configuration
	b.SetPlans(messagePlan(limit))
	xa := newSender(t, a)
	xb := *xa
	xb.s = b
	accepted, refused := raceSends(t, senders, func(i int) *sender {
		if i%2 == 1 {
			return &xb
		}
		return xa
	})
	if accepted != limit || refused != senders-limit {
		t.Fatalf("%d accepted, %d refused of %d sends racing over two nodes, want exactly %d accepted", accepted, refused, senders, limit)
	}
	if na, nb := xa.usage(), xb.usage(); na != limit || nb != limit {
		t.Fatalf("usage read by each node: %d and %d, want %d", na, nb, limit)
	}
}

// nodesBudget: the day's storage budget is the company's, not a node's: a
// send on one node and one on the other spend it, and a third is refused on
// either.
func nodesBudget(t *testing.T, open TwoNodes) {
	a, b := open(t, SendBudgetBytes)
	probe := store.Message{Phone: budgetPhone, Text: strings.Repeat("x", budgetTextBytes)}
	cost := store.MessageCost(probe)
	xa := newSender(t, a)
	xb := *xa
	xb.s = b
	// A day after the fixture's (its pairing code was charged on T0's day).
	xa.at = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	xb.at = xa.at
	if base, _ := a.StorageUsed(xa.c.ID, xa.at); base != 0 {
		t.Fatalf("a new day starts at %d bytes", base)
	}
	xa.mustSend(xa.msg(probe.Phone, probe.Text))
	xb.mustSend(xb.msg(probe.Phone, probe.Text))
	for _, x := range []*sender{xa, &xb} {
		if _, _, err := x.send(x.msg(probe.Phone, ""), store.IdempotencyKey{}); !errors.Is(err, store.ErrStorageBudget) {
			t.Fatalf("a send over the budget spent on two nodes: %v, want the budget error", err)
		}
	}
	ua, _ := a.StorageUsed(xa.c.ID, xa.at)
	ub, _ := b.StorageUsed(xa.c.ID, xa.at)
	if ua != 2*cost || ub != ua {
		t.Fatalf("storage used read by each node: %d and %d, want %d", ua, ub, 2*cost)
	}
}
