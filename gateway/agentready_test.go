package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// numberReadFails is the agents' store with the read of a number by its
// store id (the one a dispatch makes before a job goes) failing with err.
type numberReadFails struct {
	channel.Store
	err error
}

func (s numberReadFails) AgentNumberByRef(uint64, uint64) (store.AgentNumber, error) {
	return store.AgentNumber{}, s.err
}

// A store fault while the hub checks that a number's job may go ends the
// link as every other store fault of a link does (1011, or 1013 while the
// database does not answer), logged: the agent comes back and its hello
// reads the queue again. It held the job a minute, on an open link,
// without a word.
func TestAgentReadyStoreFaultEndsTheLink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		code int
	}{
		{"fault", errors.New("disk read error"), proto.CloseInternalError},
		{"unavailable", fmt.Errorf("the database does not answer: %w", store.ErrUnavailable), proto.CloseTryAgainLater},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newMoveWorld(t)
			token := w.pair("ready-agent")
			node := w.startWith(moveOptions{store: func(st channel.Store) channel.Store { return numberReadFails{st, c.err} }})
			ws := node.link(token, moveNumber)
			node.send("waits for its number's read")
			if got := closeCode(t, ws); int(got) != c.code {
				t.Fatalf("the link closed with %d, want %d", got, c.code)
			}
		})
	}
}

// pendingReads is the agents' store counting its reads of a number's queue.
type pendingReads struct {
	channel.Store
	reads *atomic.Int64
}

func (s pendingReads) AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]store.Message, error) {
	s.reads.Add(1)
	return s.Store.AgentPending(companyID, deviceID, numberID, after, limit)
}

// Jobs a link passes over (their TTL ended, the sweeper has not marked
// them yet) are read many to a read of the number's queue, not one: an
// agent back after a day away, its number's 200 jobs expired, had its
// link read the queue 202 times, one after another, before the job sent
// since went.
func TestAgentExpiredJobsReadManyToARead(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	token := w.pair("expired-agent")
	clock := testclock.New(time.Now())
	var reads atomic.Int64
	node := w.startWith(moveOptions{now: clock.Now, store: func(st channel.Store) channel.Store { return pendingReads{st, &reads} }})
	dev, err := w.st.CompanyDevice(w.company, "expired-agent")
	if err != nil {
		t.Fatal(err)
	}
	// Announced by an earlier link of the agent's, which is gone.
	if _, err := w.st.AnnounceNumbers(w.company, dev.ID, channel.WhatsApp, []string{moveNumber}, clock.Now(), 0); err != nil {
		t.Fatal(err)
	}
	const expired = 200
	for range expired {
		node.send("expires before its agent is back")
	}
	clock.Advance(channel.DefaultMessageTTL + time.Hour)
	fresh := node.send("sent once the agent is back")
	reads.Store(0)
	ws := node.link(token, moveNumber)
	if s := nextSend(t, ws); s.ID != fresh {
		t.Fatalf("got %s, want %s, the one job whose TTL runs", s.ID, fresh)
	}
	// 200 jobs passed over, 32 to a read, and the reads of the job that
	// went and of the empty queue after it.
	n := reads.Load()
	if n > 12 {
		t.Fatalf("the link read the number's queue %d times, want at most 12", n)
	}
	t.Logf("the link read the number's queue %d times", n)
}

// agentReads is the agents' store counting its reads of a number's queue
// and of the number itself: the two reads of a link's pump, for each
// number it carries.
type agentReads struct {
	channel.Store
	queue, number *atomic.Int64
}

func (s agentReads) AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]store.Message, error) {
	s.queue.Add(1)
	return s.Store.AgentPending(companyID, deviceID, numberID, after, limit)
}

func (s agentReads) AgentNumberByRef(companyID, numberID uint64) (store.AgentNumber, error) {
	s.number.Add(1)
	return s.Store.AgentNumberByRef(companyID, numberID)
}

// While a number's job waits for its gap, the link's pumps (each send
// kicks one) read neither the number's queue nor the number: the
// governor knows when the pause ends, and the link's gap timer is armed
// for it. Each pump read both, to find the job and be told to wait. A gap
// made shorter (PATCH gap_seconds) releases the link, which checks again:
// the held job goes by the new gap.
func TestAgentGapSparesThePumpsReads(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	token := w.pair("gap-reads-agent")
	var queue, number atomic.Int64
	node := w.startWith(moveOptions{gap: pacing.Gap{Min: time.Hour, Max: time.Hour},
		store: func(st channel.Store) channel.Store { return agentReads{st, &queue, &number} }})
	ws := node.link(token, moveNumber)
	first := node.send("goes at once")
	if s := nextSend(t, ws); s.ID != first {
		t.Fatalf("got %s, want %s", s.ID, first)
	}
	held := node.send("waits for the gap")
	kicksPumped(t, node.hub, "gap-reads-agent") // its pump found it held by the gap
	queue.Store(0)
	number.Store(0)
	const kicks = 20
	var later []string
	for i := range kicks {
		later = append(later, node.send(fmt.Sprintf("queued behind %d", i)))
	}
	kicksPumped(t, node.hub, "gap-reads-agent")
	q, n := queue.Load(), number.Load()
	t.Logf("%d pumps within the gap: %d reads of the queue, %d of the number", kicks, q, n)
	if q+n != 0 {
		t.Fatalf("%d pumps within the gap read the queue %d times and the number %d times, want none", kicks, q, n)
	}
	nums, err := node.agents.Numbers(context.Background(), w.company, channel.WhatsApp)
	if err != nil || len(nums) != 1 {
		t.Fatalf("numbers: %v (%v), want the one", nums, err)
	}
	short := 0.01
	if _, err := node.agents.Update(context.Background(), w.company, channel.WhatsApp, nums[0].PublicID,
		channel.Patch{Gap: &channel.GapPatch{Min: &short, Max: &short}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range append([]string{held}, later[:2]...) {
		if s := nextSend(t, ws); s.ID != id {
			t.Fatalf("got %s, want %s", s.ID, id)
		}
	}
}
