package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// Agents of one company announcing numbers new to it at once, under the
// company's limit, each read the company's closing mark (its row KEY
// SHARE) and then take the row FOR UPDATE to count its numbers: the mark
// is read after the announcement's savepoint, which each gives up before
// it waits for the company, so none holds a lock on the row that another
// waits on while it waits in turn, and the database breaks no deadlock.
// Read before the savepoint, two announcements each held KEY SHARE while
// waiting for the other's to go.
func TestAnnouncementsOfNewNumbersTakeNoDeadlock(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	c, _ := conformance.Company(t, s)
	const agents, rounds = 6, 4
	devs := make([]store.Device, agents)
	for i := range devs {
		devs[i] = conformance.Device(t, s, c.ID, fmt.Sprintf("announce-mark-%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, agents*rounds)
	for i, d := range devs {
		wg.Go(func() {
			var held []string
			for r := range rounds {
				held = append(held, fmt.Sprintf("+1555%03d%04d", i, r))
				if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, held, time.Now(), 1000); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("an announcement: %v", err)
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks: %q", n, dl.sql)
	}
	if nums, err := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp); err != nil || len(nums) != agents*rounds {
		t.Errorf("the company's numbers: %d (%v), want %d", len(nums), err, agents*rounds)
	}
}
