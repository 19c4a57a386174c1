package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Phones that answer are pinged again and again, each about once an
// interval (never twice in much less), and stay online; once their links
// end, the hub's pinger holds none of them and its timer stops.
func TestPingsRepeatPerLinkAndStopWithIt(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	r := newRig(t, Config{PingInterval: interval, PongTimeout: 5 * time.Second})
	var mu sync.Mutex
	pings := map[string][]time.Time{}
	var links []*websocket.Conn
	for i := range 3 {
		fp := fmt.Sprintf("pixel-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ws, _, err := websocket.Dial(ctx, r.url, &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + r.pair(fp)}},
			OnPingReceived: func(context.Context, []byte) bool {
				mu.Lock()
				pings[fp] = append(pings[fp], time.Now())
				mu.Unlock()
				return true
			},
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		writeFrame(t, ws, proto.Hello{Protocol: 1})
		if _, ok := readFrame(t, ws).(*proto.Welcome); !ok {
			t.Fatal("no welcome")
		}
		go func() { // read, so that pings are answered
			for {
				if _, _, err := ws.Read(context.Background()); err != nil {
					return
				}
			}
		}()
		links = append(links, ws)
	}
	eventually(t, "five pings on every link", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range 3 {
			if len(pings[fmt.Sprintf("pixel-%d", i)]) < 5 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	for fp, at := range pings {
		for i := 1; i < len(at); i++ {
			// The interval less its jitter (20%) and a tick of the pinger.
			if gap := at[i].Sub(at[i-1]); gap < interval*8/10-interval/pingTicksPerWait {
				t.Errorf("%s: pings %v apart, want about %v", fp, gap, interval)
			}
		}
		if !r.hub.Online(fp) {
			t.Errorf("%s went offline while it answered pings", fp)
		}
	}
	mu.Unlock()

	for _, ws := range links {
		ws.Close(websocket.StatusNormalClosure, "bye")
	}
	eventually(t, "every link gone", func() bool { return r.hub.Count() == 0 })
	p := r.hub.pings
	eventually(t, "the pinger empty and its timer stopped", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.slots {
			if c != nil {
				return false
			}
		}
		return p.n == 0 && (p.timer == nil || !p.timer.Stop()) // Stop: false when it was stopped
	})
}
