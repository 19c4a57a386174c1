package boltstore

import (
	"errors"
	"testing"
	"time"
)

// TestAgentInboundNeedsTheHolder: an agent's inbound message counts only on
// a number or handle that agent holds (its latest hello announced it). An
// agent of the same company naming another agent's number is refused and
// nothing is stored; once the number moves to it, the same frame passes.
func TestAgentInboundNeedsTheHolder(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp-other", CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte("tok-other")}}); err != nil {
		t.Fatal(err)
	}
	holder := deviceOf(t, s, c.ID, "fp-a@example.com")
	other := deviceOf(t, s, c.ID, "fp-other")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	if _, err := s.AnnounceNumbers(c.ID, holder.ID, ChannelNameWhatsApp, []string{"+15550001111"}, now, 0); err != nil {
		t.Fatal(err)
	}
	in := func(d Device, clientID string) (Message, error) {
		m := Message{UUID: "u-" + clientID, CompanyID: c.ID, DeviceID: d.ID, Channel: ChannelNameWhatsApp,
			Phone: "+15557654321", Account: "+15550001111", Text: "hi", ClientID: clientID}
		out, _, err := s.StoreAgentInbound(&m, clock)
		return out, err
	}
	if _, err := in(other, "forged-1"); !errors.Is(err, ErrNumberNotHeld) {
		t.Fatalf("inbound from an agent that does not hold the number: got %v, want ErrNumberNotHeld", err)
	}
	nums, _ := s.AgentNumbers(c.ID, ChannelNameWhatsApp)
	if msgs, total, _ := s.AgentMessages(c.ID, nums[0].ID, 1, 10); total != 0 {
		t.Fatalf("got %d stored messages (%v), want none", total, msgs)
	}
	if _, err := in(holder, "real-1"); err != nil {
		t.Fatalf("inbound from the holder: %v", err)
	}
	// The number moves: the new holder's frames count, the old one's no more.
	if _, err := s.AnnounceNumbers(c.ID, other.ID, ChannelNameWhatsApp, []string{"+15550001111"}, now, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := in(other, "forged-1"); err != nil {
		t.Fatalf("inbound from the new holder: %v", err)
	}
	// A resend of a message it stored while it held the number is acked again.
	if _, err := in(holder, "real-1"); err != nil {
		t.Fatalf("a resend of a stored message from the former holder: %v", err)
	}
	if _, err := in(holder, "real-2"); !errors.Is(err, ErrNumberNotHeld) {
		t.Fatalf("inbound from the former holder: got %v, want ErrNumberNotHeld", err)
	}
}
