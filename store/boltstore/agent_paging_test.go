package boltstore

import (
	"math"
	"testing"
	"time"
)

// TestAgentMessagesHugePage: a page number near the largest int is past the
// end (an empty page), never the first page again by overflow, as on
// /chat/messages.
func TestAgentMessagesHugePage(t *testing.T) {
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
	if _, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, func() time.Time { return now }, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ page, limit int }{{math.MaxInt, 100}, {math.MaxInt/2 + 1, 2}, {2, 1}} {
		msgs, total, err := s.AgentMessages(c.ID, nums[0].ID, tc.page, tc.limit)
		if err != nil || total != 1 || len(msgs) != 0 {
			t.Errorf("page %d of %d: got %d messages of %d (%v), want 0 of 1", tc.page, tc.limit, len(msgs), total, err)
		}
	}
	if msgs, _, _ := s.AgentMessages(c.ID, nums[0].ID, 1, 100); len(msgs) != 1 {
		t.Fatalf("page 1: got %d messages, want 1", len(msgs))
	}
}
