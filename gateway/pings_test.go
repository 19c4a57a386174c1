package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A phone that pings as fast as it can is closed as a flood (4029) once over
// its ping bound, with the pongs it got until then; one that pings within
// the bound (PROTOCOL.md: at most every 15 s) stays linked. Without the
// bound every ping was answered: one phone kept a core of the server busy.
func TestPhonePingsAreBounded(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	pinger := func(fingerprint string) (*websocket.Conn, chan websocket.StatusCode) {
		ws := r.connect(r.pair(fingerprint))
		closed := make(chan websocket.StatusCode, 1)
		go func() { // Ping needs a reader to take its pong
			for {
				if _, _, err := ws.Read(context.Background()); err != nil {
					closed <- websocket.CloseStatus(err)
					return
				}
			}
		}()
		return ws, closed
	}
	ping := func(ws *websocket.Conn) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return ws.Ping(ctx)
	}

	calm, calmClosed := pinger("calm")
	for i := range PhonePingBurst - 1 { // and one more at the end
		if err := ping(calm); err != nil {
			t.Fatalf("ping %d within the bound: %v", i, err)
		}
	}

	fast, closed := pinger("fast")
	answered := 0
	for range 10 * PhonePingBurst {
		if ping(fast) != nil {
			break
		}
		answered++
	}
	if answered >= 10*PhonePingBurst {
		t.Fatalf("%d pings answered as fast as they came", answered)
	}
	select {
	case code := <-closed:
		if code != proto.CloseFlood {
			t.Fatalf("closed with %d, want %d (flood)", code, proto.CloseFlood)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the link was not closed")
	}
	select {
	case code := <-calmClosed:
		t.Fatalf("the phone within the bound was closed with %d", code)
	default:
	}
	if err := ping(calm); err != nil {
		t.Fatalf("the phone within the bound: %v", err)
	}
}
