package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/sms"
)

// TestPaceTimersPumpIsCounted: the pump a paced link's timer starts (the
// send held back by sms_per_minute, due) runs as one of the link's counted
// goroutines, as a kick's pump does: Shutdown waits for it and names it
// among those still running at its deadline. It ran on the timer's own
// goroutine, outside the hub's wait group, so Shutdown could return with
// it under way.
func TestPaceTimersPumpIsCounted(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	token := r.pair("pixel-1")
	perMinute := 30 // a send every 2 s: the timer is armed long before it fires
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &perMinute}); err != nil {
		t.Fatal(err)
	}
	ws := r.connect(token)
	defer ws.CloseNow()
	for i := range 2 {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: fmt.Sprint("m", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m0" {
		t.Fatalf("got %#v, want m0 at once", s)
	}
	r.hub.mu.Lock()
	c := r.hub.conns["pixel-1"]
	r.hub.mu.Unlock()
	eventually(t, "m1 held back by the pace's timer", func() bool {
		c.pumpMu.Lock()
		defer c.pumpMu.Unlock()
		return c.paceTimer != nil
	})
	// The timer's pump stops in its read of the queue until released (a
	// read with no one waiting in the select below goes on).
	entered, release := make(chan struct{}), make(chan struct{})
	block := func() {
		select {
		case entered <- struct{}{}:
			<-release
		default:
		}
	}
	r.beforeRead.Store(&block)
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the pace's timer never pumped")
	}
	running := r.hub.running()
	close(release)
	r.beforeRead.Store(nil)
	if !strings.Contains(running, "1 pump") {
		t.Errorf("while the timer's pump reads the queue, the link goroutines running: %q, want it counted (1 pump)", running)
	}
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m1" {
		t.Fatalf("got %#v, want m1 once its pace allows", s)
	}
}
