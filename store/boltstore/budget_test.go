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
		_, _, err := s.StoreInbound(&in, clock, nil)
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

// An inbound message the budget admits keeps its webhook event even when
// the event takes the day over the budget (refusing it alone would lose the
// push, undoing the message would fail the whole batch); the company's next
// message is refused.
func TestBudgetCountsWebhookEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), Options{CompanyDailyStorage: 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 2)
	d := deviceOf(t, s, c.ID, "fp-a@example.com")
	event := []byte(`{"data":"` + strings.Repeat("y", 1500) + `"}`)
	inbound := func(clientID string) (OutboxAdd, error) {
		var added OutboxAdd
		m := Message{UUID: "u-" + clientID, CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100001", Text: "hi", SIMSlot: "SIM1", ClientID: clientID}
		_, _, err := s.StoreInbound(&m, func() time.Time { return at }, func(tx WriteTx, m Message) error {
			var err error
			added, err = s.AddWebhookEvent(tx, m.CompanyID, at, OutboxLimits{}, func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
				_, ds, _ := oneDeliveryPerEntry(at)(set)
				return WebhookEvent{ID: "ev-" + clientID, Body: event}, ds, nil
			})
			return err
		})
		return added, err
	}
	added, err := inbound("c1")
	if err != nil || added.Queued != 2 {
		t.Fatalf("the first message: got %+v, %v; want it stored with its 2 deliveries", added, err)
	}
	msgCost := store.MessageCost(Message{Text: "hi", Phone: "+15550100001", ClientID: "c1"})
	want := msgCost + int64(len(event)) + 2*store.DeliveryRowCost
	if used, _ := s.StorageUsed(c.ID, at); used != want || used <= 2000 {
		t.Fatalf("got %d bytes counted, want %d (the message and its event, over the budget)", used, want)
	}
	if _, err := inbound("c2"); !errors.Is(err, ErrStorageBudget) {
		t.Fatalf("the next message: got %v, want the budget error", err)
	}
	if msgs, _ := s.InboundList(InboundQuery{CompanyID: c.ID, Limit: 10}); len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
}

// A refused inbound (budget spent, device gone) writes nothing: no counter,
// no hook. (It returns nil from its closure, so that it never fails the
// group-commit batch it shares with other writers.)
func TestInboundRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), Options{CompanyDailyStorage: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	d := deviceOf(t, s, c.ID, "fp-a@example.com")
	m := Message{UUID: "u1", CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100001", Text: "hi", SIMSlot: "SIM1", ClientID: "c1"}
	var hook int
	_, _, err = s.StoreInbound(&m, func() time.Time { return at }, func(WriteTx, Message) error { hook++; return nil })
	if !errors.Is(err, ErrStorageBudget) || hook != 0 {
		t.Fatalf("got %v with the hook run %d times, want the budget error and no hook", err, hook)
	}
	if used, _ := s.StorageUsed(c.ID, at); used != 0 {
		t.Fatalf("got %d bytes counted, want 0", used)
	}
	gone := m
	gone.DeviceID, gone.ClientID = d.ID+1000, "c2"
	if _, _, err := s.StoreInbound(&gone, func() time.Time { return at }, nil); !errors.Is(err, ErrDeviceGone) {
		t.Fatalf("an unknown device: got %v, want ErrDeviceGone", err)
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
