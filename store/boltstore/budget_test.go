package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"errors"
	"strings"
	"testing"
	"time"
)

// The budget at its boundary: a write that brings the day's bytes exactly
// to the budget passes, one byte more is refused whole, and the next UTC
// day starts from zero.
func TestDailyStorageBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := time.Date(2026, 11, 22, 23, 59, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	m := Message{Device: "fp-a@example.com", Channel: "sms", Phone: "+15550100001", Text: strings.Repeat("x", 1000), SIMSlot: "SIM1", ReceivedAt: "2026-11-22T10:00:00.000Z"}
	cost := store.MessageCost(Message{Text: m.Text, Phone: m.Phone, ClientID: "c1", ReceivedAt: m.ReceivedAt})
	s, err := Open(dir, Options{CompanyDailyStorage: 2 * cost})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	other, _ := webhookFixture(t, s, "b@example.com", 0)
	devA, devB := deviceOf(t, s, c.ID, m.Device), deviceOf(t, s, other.ID, "fp-b@example.com")
	inbound := func(clientID string, d Device) error {
		in := m
		in.ClientID, in.CompanyID, in.DeviceID, in.UUID = clientID, d.CompanyID, d.ID, "u-"+clientID
		_, _, err := s.StoreInbound(&in, clock)
		return err
	}
	for _, id := range []string{"c1", "c2"} {
		if err := inbound(id, devA); err != nil {
			t.Fatalf("inbound %s within the budget: %v", id, err)
		}
	}
	if used, _ := s.StorageUsed(c.ID, at); used != 2*cost {
		t.Fatalf("got %d bytes used, want %d (exactly the budget)", used, 2*cost)
	}
	err = inbound("c3", devA)
	var be *BudgetError
	if !errors.Is(err, ErrStorageBudget) || !errors.As(err, &be) || !be.Reset.Equal(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("one message over: got %v, want a budget error renewing at midnight", err)
	}
	if msgs, _ := s.InboundList(InboundQuery{CompanyID: c.ID, Limit: 10}); len(msgs) != 2 {
		t.Fatalf("got %d messages stored, want 2 (the refused one is not)", len(msgs))
	}
	// A repeat of a stored message costs nothing and is answered.
	if err := inbound("c1", devA); err != nil {
		t.Fatalf("a repeat over the budget: %v", err)
	}
	// A send over the budget is refused too, and queues nothing.
	out := Message{CompanyID: c.ID, Device: m.Device, Channel: "sms", Phone: "+15550100002", Text: "hi", SIMSlot: "SIM1", UUID: "q1"}
	if _, _, err := s.Enqueue(&out, IdempotencyKey{}, clock, nil, nil); !errors.Is(err, ErrStorageBudget) {
		t.Fatalf("send over the budget: got %v, want ErrStorageBudget", err)
	}
	if pending, _ := s.Pending(c.ID, devA.ID, 0, 10, clock(), nil); len(pending) != 0 {
		t.Fatalf("got %d queued after a refused send, want 0", len(pending))
	}
	// Another company's budget is its own.
	if err := inbound("c1", devB); err != nil {
		t.Fatalf("another company: %v", err)
	}
	if used, _ := s.StorageUsed(other.ID, at); used != cost {
		t.Fatalf("other company: got %d bytes, want %d", used, cost)
	}
	// The next day the budget is whole again.
	at = at.Add(time.Minute)
	if err := inbound("c3", devA); err != nil {
		t.Fatalf("the next day: %v", err)
	}
}

// deviceOf is the live device of the company with the fingerprint.
func deviceOf(t *testing.T, s *Store, companyID uint64, fingerprint string) Device {
	t.Helper()
	d, err := s.CompanyDevice(companyID, fingerprint)
	if err != nil {
		t.Fatalf("device %s of company %d: %v", fingerprint, companyID, err)
	}
	return d
}
