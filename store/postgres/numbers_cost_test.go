package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestNumbersListCost: the list of a company's 1,000 WhatsApp numbers with
// each one's sends today (AgentNumbersSentSince, what GET /whatsapp/numbers
// and the console's page read) costs what the numbers alone do
// (AgentNumbers): one statement, not one more a number.
func TestNumbersListCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "list-cost")
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("+1555300%04d", i)
	}
	nums, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, addrs, conformance.T0, 0)
	if err != nil || len(nums) != len(addrs) {
		t.Fatalf("announce: %d (%v)", len(nums), err)
	}
	for i := 0; i < len(nums); i += 10 {
		m := store.Message{UUID: fmt.Sprintf("list-cost-%d", i), CompanyID: c.ID, Channel: store.ChannelNameWhatsApp, NumberRef: nums[i].PublicID,
			Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
		if _, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, noVet, nil); err != nil {
			t.Fatal(err)
		}
	}
	cost := func(read func() error) int64 {
		t.Helper()
		n0 := counted.n.Load()
		if err := read(); err != nil {
			t.Fatal(err)
		}
		return counted.n.Load() - n0
	}
	since := conformance.T0.Truncate(24 * time.Hour)
	plain := cost(func() error { _, err := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp); return err })
	var sent []int
	listed := cost(func() error {
		var err error
		_, sent, err = s.AgentNumbersSentSince(c.ID, store.ChannelNameWhatsApp, since)
		return err
	})
	oneByOne := cost(func() error {
		for _, n := range nums {
			if _, err := s.AgentSendsSince(c.ID, n.ID, since); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("1,000 numbers: %d statements alone, %d with their sends today; their sends counted one number at a time %d more", plain, listed, oneByOne)
	if listed != plain {
		t.Errorf("1,000 numbers with their sends today: %d statements, want %d, as the numbers alone", listed, plain)
	}
	total := 0
	for _, n := range sent {
		total += n
	}
	if len(sent) != 1000 || total != 100 {
		t.Errorf("%d numbers with %d sends today, want 1000 with 100", len(sent), total)
	}
}

func noVet(store.AgentNumber, func(time.Time) []time.Time) (func(), error) { return func() {}, nil }
