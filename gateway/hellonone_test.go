package gateway

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/store"
)

// announceCounter counts the hellos that reach the agents' store (each
// Announce writes the device's numbers on both channels).
type announceCounter struct {
	Agents
	n atomic.Int64
}

func (a *announceCounter) Announce(ctx context.Context, dev store.Device, hello channel.CheckedAnnounce) ([]uint64, error) {
	a.n.Add(1)
	return a.Agents.Announce(ctx, dev, hello)
}

// TestAgentHelloOfNoneLetsGoOnlyWhatIsHeld: a hello that announces no
// number lets go the number the device held (PROTOCOL.md section 16.1):
// held by nobody, its send waits queued, and reaches the next agent that
// announces it. An SMS phone's hellos, holding none, make no agent write
// (no Announce): what they cost before; nor does the agent's next hello
// once it holds none.
func TestAgentHelloOfNoneLetsGoOnlyWhatIsHeld(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	counter := &announceCounter{}
	node := w.startWith(moveOptions{wrap: func(s *channel.Service) Agents { counter.Agents = s; return counter }})
	announced := func(want int64, when string) {
		t.Helper()
		if got := counter.n.Load(); got != want {
			t.Fatalf("%s: %d hellos reached the agents' store, want %d", when, got, want)
		}
	}

	phone := w.pair("none-sms-phone")
	for range 2 {
		node.link(phone).CloseNow()
	}
	announced(0, "an SMS phone's two hellos")

	tokenA, tokenB := w.pair("none-agent-a"), w.pair("none-agent-b")
	a := node.link(tokenA, moveNumber)
	announced(1, "the agent's hello with its number")
	a.CloseNow()
	a = node.link(tokenA)
	announced(2, "the agent's hello of none")
	nums, err := node.agents.Numbers(context.Background(), w.company, channel.WhatsApp)
	if err != nil || len(nums) != 1 || nums[0].DeviceID != 0 || nums[0].Device != "none-agent-a" {
		t.Fatalf("the number after a hello of none: %+v (%v), want held by nobody, its last agent named", nums, err)
	}
	waiting := node.send("waits")
	if got := w.status(waiting); got != store.MsgQueued {
		t.Fatalf("a send to the number held by nobody: %s, want queued", got)
	}
	a.CloseNow()
	node.link(tokenA).CloseNow()
	announced(2, "the agent's next hello, holding none")

	b := node.link(tokenB, moveNumber)
	if s := nextSend(t, b); s.ID != waiting {
		t.Fatalf("B, announcing the number, got %s, want %s", s.ID, waiting)
	}
	reported(t, b, waiting)
}
