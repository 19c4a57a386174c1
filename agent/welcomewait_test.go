package agent

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A server whose database is slow answers the hello late, within its own
// bound (a database deadline of 30 s before it closes with 1013): the agent
// waits for the welcome (PROTOCOL.md 7.2) and the link comes up, where it
// gave the link up at 10 s and went to its growing backoff.
func TestLateWelcomeWithinTheServersBoundIsWaitedFor(t *testing.T) {
	t.Parallel()
	const late = 12 * time.Second // over the 10 s the agent waited
	job := proto.Send{ID: "after-late-welcome", Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	acked := make(chan struct{}, 8)
	h := &helloHub{answer: func(ctx context.Context, ws *websocket.Conn) {
		select {
		case <-time.After(late):
		case <-ctx.Done():
			return
		}
		welcomeWithJob(ctx, ws, 45, job, acked)
	}}
	tr := &memTransport{inbox: make(chan Received)}
	runAgentAt(t, h, tr)
	select {
	case <-acked:
	case <-time.After(2 * late):
		t.Fatalf("no link within %v of a server that answers the hello after %v (hellos: %d)", 2*late, late, h.count())
	}
	poll.Until(t, "the job runs", func() bool { return tr.count("after-late-welcome") == 1 })
	if n := h.count(); n != 1 {
		t.Fatalf("hellos: got %d, want 1 (the first link welcomed)", n)
	}
}
