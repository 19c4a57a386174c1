package boltstore

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEnqueueAgentGivesTheSlotBack: a send the store refuses after the
// governor's slot was taken (here, over the daily storage budget) calls the
// slot's undo, exactly once; an accepted send keeps its slot.
func TestEnqueueAgentGivesTheSlotBack(t *testing.T) {
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
	var mu sync.Mutex
	taken, given := 0, 0
	vet := func(AgentNumber, func(time.Time) []time.Time) (func(), error) {
		mu.Lock()
		taken++
		mu.Unlock()
		return func() { mu.Lock(); given++; mu.Unlock() }, nil
	}
	send := func(text string) error {
		m := Message{UUID: "u-" + time.Now().String(), CompanyID: c.ID, Channel: ChannelNameWhatsApp, NumberRef: nums[0].PublicID, Phone: "+15557654321", Text: text}
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
	// A paused number refuses before the governor is asked.
	if _, err := s.UpdateAgentNumber(c.ID, ChannelNameWhatsApp, nums[0].PublicID, now, func(n *AgentNumber) error { n.Status = NumberPaused; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := send("paused"); !errors.Is(err, ErrNumberPaused) || taken != 2 {
		t.Fatalf("got %v after %d slots, want ErrNumberPaused and no slot", err, taken)
	}
	// Another company's view of the number: not found.
	other, _ := webhookFixture(t, s, "b@example.com", 0)
	if _, err := s.AgentNumber(other.ID, ChannelNameWhatsApp, nums[0].PublicID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another company reads the number: %v", err)
	}
}

// TestAnnounceNumbersLimit: a company's new numbers stop at the limit; known
// ones still move between its agents.
func TestAnnounceNumbersLimit(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	d := deviceOf(t, s, c.ID, "fp-a@example.com")
	now := time.Now()
	if _, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, []string{"+15550001111", "+15550002222"}, now, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, []string{"+15550001111", "+15550003333"}, now, 2); !errors.Is(err, ErrTooManyNumbers) {
		t.Fatalf("a third number: got %v, want ErrTooManyNumbers", err)
	}
	if nums, _ := s.AgentNumbers(c.ID, ChannelNameWhatsApp); len(nums) != 2 {
		t.Fatalf("got %d numbers, want 2: a refused hello stores nothing", len(nums))
	}
	if _, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameIMessage, []string{"a@example.com"}, now, 2); err != nil {
		t.Fatalf("handles count apart: %v", err)
	}
}

// An agent's ack of a number's job is remembered on the number, so that the
// governor's gap outlives a restart (pacing.Governor.Dispatch).
func TestAckRecordsWhenTheNumberLastSent(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	d := deviceOf(t, s, c.ID, "fp-a@example.com")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	nums, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, []string{"+15550001111"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := Message{UUID: "u-1", CompanyID: c.ID, Channel: ChannelNameWhatsApp, NumberRef: nums[0].PublicID, Phone: "+15557654321", Text: "hi"}
	if _, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, func() time.Time { return now }, func(AgentNumber, func(time.Time) []time.Time) (func(), error) { return func() {}, nil }, nil); err != nil {
		t.Fatal(err)
	}
	taken := now.Add(3 * time.Second)
	if _, moved, err := s.Transition(c.ID, d.ID, "u-1", MsgSending, "", "", taken); err != nil || !moved {
		t.Fatalf("ack: moved %v, %v", moved, err)
	}
	if _, _, err := s.Transition(c.ID, d.ID, "u-1", MsgDelivered, "", "", taken.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := s.AgentNumberByRef(c.ID, nums[0].ID)
	if err != nil || !n.LastTakenAt.Equal(taken) {
		t.Fatalf("last taken: got %v (%v), want the ack's time %v, not a later report's", n.LastTakenAt, err, taken)
	}
}
