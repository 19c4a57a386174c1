package postgres

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// An agent's hello that announces its WhatsApp numbers and iMessage
// handles again (an agent linking again, the usual hello) is one
// transaction (AnnounceAgentNumbers), where it was one a channel
// (AnnounceNumbers twice): fewer statements and round trips, and one
// commit. Logged with -v, for docs/performance.md.
func TestAnnounceBothChannelsCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "announce-write-cost")
	wa, im := []string{"+15550001111", "+15550002222"}, []string{"ana@example.com"}
	sets := []store.Announced{{Channel: store.ChannelNameWhatsApp, Addresses: wa}, {Channel: store.ChannelNameIMessage, Addresses: im}}
	if _, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	cost := func(write func() error) (stmts, trips int64) {
		t.Helper()
		n0, t0 := counted.n.Load(), counted.trips.Load()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		return counted.n.Load() - n0, counted.trips.Load() - t0
	}
	ps, pt := cost(func() error {
		if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, wa, time.Now(), 1000); err != nil {
			return err
		}
		_, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameIMessage, im, time.Now(), 1000)
		return err
	})
	ws, wt := cost(func() error {
		_, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000)
		return err
	})
	t.Logf("a hello's numbers and handles announced again: a write a channel %d statements in %d round trips; one write %d in %d", ps, pt, ws, wt)
	if ws >= ps || wt >= pt {
		t.Errorf("one write: %d statements in %d round trips, want fewer than a write a channel's %d in %d", ws, wt, ps, pt)
	}
}
