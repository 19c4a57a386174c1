package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/base62"
)

// A number's public id is its channel's prefix and 20 base62 characters,
// fresh each time.
func TestNewNumberPublicID(t *testing.T) {
	t.Parallel()
	for channel, prefix := range map[string]string{ChannelNameWhatsApp: "wa_", ChannelNameIMessage: "im_"} {
		a, err := NewNumberPublicID(channel)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewNumberPublicID(channel)
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(a, prefix)
		if !ok || len(rest) != 20 || strings.Trim(rest, base62.Alphabet) != "" {
			t.Errorf("%s: %q, want %s and 20 base62 characters", channel, a, prefix)
		}
		if a == b {
			t.Errorf("%s: two ids alike: %q", channel, a)
		}
	}
}

// A change stamps updated_at; one that changes nothing leaves the number
// as it was; fn's error changes nothing.
func TestChangeAgentNumber(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	n := AgentNumber{ID: 1, Status: NumberActive, UpdatedAt: created}
	got, changed, err := ChangeAgentNumber(n, now, func(n *AgentNumber) error { n.Status = NumberPaused; return nil })
	if err != nil || !changed || got.Status != NumberPaused || !got.UpdatedAt.Equal(now) || got.UpdatedAt.Location() != time.UTC {
		t.Errorf("a change: %+v, changed %v, %v; want the status changed and updated_at now in UTC", got, changed, err)
	}
	got, changed, err = ChangeAgentNumber(n, now, func(n *AgentNumber) error { n.Status = NumberActive; return nil })
	if err != nil || changed || got != n {
		t.Errorf("no change: %+v, changed %v, %v; want the number as it was", got, changed, err)
	}
	boom := errors.New("boom")
	if _, changed, err = ChangeAgentNumber(n, now, func(n *AgentNumber) error { n.Status = NumberPaused; return boom }); !errors.Is(err, boom) || changed {
		t.Errorf("fn's error: changed %v, %v; want %v", changed, err, boom)
	}
}
