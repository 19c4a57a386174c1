package agent

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// hangingTransport answers its first inventories, then hangs in each
// further one until its context ends, as a hung tool does.
type hangingTransport struct {
	memTransport
	answers int32 // inventories answered before the hang
	asked   atomic.Int32
}

func (h *hangingTransport) Inventory(ctx context.Context) (Inventory, error) {
	if h.asked.Add(1) <= h.answers {
		return h.memTransport.Inventory(ctx)
	}
	<-ctx.Done()
	return Inventory{}, ctx.Err()
}

// A device whose inventory hangs before a reconnect does not keep the
// agent off the server: the inventory is given up at the tool's timeout,
// and the last one announced.
func TestHungInventoryDoesNotHoldTheReconnect(t *testing.T) {
	t.Parallel()
	h := &fakeHub{t: t}
	h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
		if link == 1 {
			ws.Close(websocket.StatusGoingAway, "going away")
			return
		}
		for range frames {
		}
	}
	// The start and the first hello are answered; the second hello's hangs.
	tr := &hangingTransport{memTransport: memTransport{inbox: make(chan Received)}, answers: 2}
	startAgentSet(t, h, tr, filepath.Join(t.TempDir(), "j.db"), func(a *Agent) {
		a.toolTimeout = 100 * time.Millisecond
	})
	poll.Until(t, "a second link after the inventory hung", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.links >= 2
	})
	if n := tr.asked.Load(); n < 3 {
		t.Fatalf("inventories asked: %d, want the hung one among them", n)
	}
	h.mu.Lock()
	hello := h.hello
	h.mu.Unlock()
	if !strings.Contains(hello, `"slot":"SIM1"`) {
		t.Fatalf("second hello %s, want the last inventory's SIM", hello)
	}
}
