package boltstore

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestEnqueueAgentChargesTheBudget: a WhatsApp send is charged to the
// company's daily storage budget, and one over it, refused after the
// governor's slot was taken, gives the slot back. (The conformance suite
// Agents holds the rest of the agent channels' rules; its stores have no
// budget.)
func TestEnqueueAgentChargesTheBudget(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{CompanyDailyStorage: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	d := deviceOf(t, s, c.ID, "fp-a@example.com")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	nums, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, []string{"+15550001111"}, now, 1)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce: %v %v", nums, err)
	}
	taken, given := 0, 0
	vet := func(AgentNumber, func(time.Time) []time.Time) (func(), error) {
		taken++
		return func() { given++ }, nil
	}
	send := func(text string) error {
		m := Message{UUID: "u-" + text[:1], CompanyID: c.ID, Channel: ChannelNameWhatsApp, NumberRef: nums[0].PublicID, Phone: "+15557654321", Text: text}
		_, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, func() time.Time { return now }, vet, nil)
		return err
	}
	if err := send("short text"); err != nil {
		t.Fatal(err)
	}
	if err := send(strings.Repeat("x", 5000)); !errors.Is(err, ErrStorageBudget) {
		t.Fatalf("got %v, want the budget refusal", err)
	}
	if taken != 2 || given != 1 {
		t.Fatalf("slots taken %d, given back %d; want 2 and 1", taken, given)
	}
}
