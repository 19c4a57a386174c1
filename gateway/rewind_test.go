package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// countedAgents is the agent channels counting the reads of numbers'
// queues (Pending): each is a store read (on PostgreSQL, a query).
type countedAgents struct {
	*channel.Service
	reads atomic.Int64
}

func (a *countedAgents) Pending(ctx context.Context, dev store.Device, numberID, after uint64, limit int) ([]sms.Job, error) {
	a.reads.Add(1)
	return a.Service.Pending(ctx, dev, numberID, after, limit)
}

// A link that passed over a job handed to the number's former agent reads
// it again only when a hand-out is released (that agent deleted, the
// number resumed), not at every kick: a kick for a new job read the queue
// again from the job passed over, and with it every job of the link not
// acked yet, so the reads of a kick grew with the jobs in flight. Here each
// new job costs the same two reads (the job, then the queue's end) however
// many are in flight, and the former agent's deletion still brings its job
// to the link. The agents' clock moves a second before each job, past the
// number's gap (a millisecond), so no job waits for a gap's timer.
func TestAgentKickReadsFromTheCursor(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	tokenA, tokenB := w.pair("rewind-agent-a"), w.pair("rewind-agent-b")
	clock := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	var counted *countedAgents
	node := w.startWith(moveOptions{now: clock.Now, wrap: func(s *channel.Service) Agents {
		counted = &countedAgents{Service: s}
		return counted
	}})
	a := node.link(tokenA, moveNumber)
	lost := node.send("handed to A")
	if s := nextSend(t, a); s.ID != lost {
		t.Fatalf("A got %s, want %s", s.ID, lost)
	}
	a.CloseNow() // its ack never came: the job stays A's
	b := node.link(tokenB, moveNumber)
	// The first job is read with the link's first pump under way, which
	// reads the queue too.
	clock.Advance(time.Second)
	if first := node.send("for B"); nextSend(t, b).ID != first {
		t.Fatalf("B did not get its first job %s", first)
	}
	for i := range 6 {
		clock.Advance(time.Second)
		kicksPumped(t, node.hub, "rewind-agent-b") // the last job's kick's, which read on to the queue's end
		before := counted.reads.Load()
		id := node.send("for B")
		if s := nextSend(t, b); s.ID != id {
			t.Fatalf("B got %s, want %s", s.ID, id)
		}
		kicksPumped(t, node.hub, "rewind-agent-b") // its kick's pump, which goes on to the queue's end
		if reads := counted.reads.Load() - before; reads != 2 {
			t.Errorf("job %d (%d in flight): its kick read the number's queue %d times, want 2", i, i+1, reads)
		}
	}
	clock.Advance(time.Second)
	if _, err := w.devices.Delete(context.Background(), w.company, "rewind-agent-a"); err != nil {
		t.Fatal(err)
	}
	if s := nextSend(t, b); s.ID != lost {
		t.Fatalf("B got %s after A's deletion, want A's job %s", s.ID, lost)
	}
}
