package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A send frame whose id the agent could neither journal nor answer (none,
// or longer than any job id: bbolt takes keys up to 32 KiB, and the
// server answers an ack of an id over 128 bytes not_found) is ignored:
// the link stays up and the jobs after it are carried out. The journal's
// refusal used to end the link, and a server that sent it again first on
// every link held the agent in a reconnect loop with none of its jobs done.
func TestSendWithAnUnusableIDIsIgnored(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"", strings.Repeat("x", proto.MaxJobIDBytes+1), strings.Repeat("x", 40000)} {
		t.Run(fmt.Sprint(len(id)), func(t *testing.T) {
			t.Parallel()
			good := fmt.Sprint("good-", len(id))
			h := &fakeHub{t: t}
			h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
				ctx := context.Background()
				exp := stamp(time.Now().Add(time.Hour))
				write(ctx, ws, proto.Send{ID: id, Channel: "sms", To: "+15551234567", Message: "odd", SIMSlot: "SIM1", ExpiresAt: exp})
				write(ctx, ws, proto.Send{ID: good, Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: exp})
				for range frames {
				}
			}
			tr := &memTransport{inbox: make(chan Received)}
			startAgent(t, h, tr)
			poll.Until(t, "the job after the odd one is carried out and reported", func() bool {
				return tr.count(good) == 1 && h.seen(`"type":"status","id":"`+good+`"`) == 1
			})
			h.mu.Lock()
			links := h.links
			h.mu.Unlock()
			if links != 1 {
				t.Fatalf("links: got %d, want the first one kept", links)
			}
			if n := h.seen(`"type":"ack","id":"` + id + `"`); n != 0 {
				t.Fatalf("the odd send was acked %d times", n)
			}
		})
	}
}
