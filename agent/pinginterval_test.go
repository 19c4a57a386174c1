package agent

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A hub whose welcome names a huge ping_interval_seconds (a hostile or
// broken one) does not drop the agent's link: the liveness bound, twice
// the interval, is taken from the interval bounded (PROTOCOL.md section
// 8.2), where the arithmetic on the number as it came overflowed. 146
// years (4,611,686,019 s) made a negative bound, and the link was declared
// dead as soon as it was up: the agent reconnected without end, and never
// acked a job.
func TestHugePingIntervalKeepsTheLink(t *testing.T) {
	t.Parallel()
	for _, secs := range []int{4_611_686_019, 18_446_744_074, 1e18, math.MaxInt64} {
		t.Run(fmt.Sprint(secs), func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("ping-%d", secs)
			job := proto.Send{ID: id, Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: stamp(time.Now().Add(time.Hour))}
			acked := make(chan struct{}, 8)
			h := &helloHub{answer: func(ctx context.Context, ws *websocket.Conn) {
				welcomeWithJob(ctx, ws, secs, job, acked)
			}}
			tr := &memTransport{inbox: make(chan Received)}
			runAgentAt(t, h, tr)
			select {
			case <-acked:
			case <-time.After(poll.Timeout):
				t.Fatalf("the job was never acked; the agent sent %d hellos", h.count())
			}
			poll.Until(t, "the job runs", func() bool { return tr.count(id) == 1 })
			if n := h.count(); n != 1 {
				t.Fatalf("hellos: got %d, want 1 (the link was not dropped)", n)
			}
		})
	}
}
