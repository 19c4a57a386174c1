package gateway

import (
	"context"
	"fmt"
	"runtime"
	"strings"
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
		ws := r.connectHearingPings(r.pair(fp), func(context.Context, []byte) bool {
			mu.Lock()
			pings[fp] = append(pings[fp], time.Now())
			mu.Unlock()
			return true
		})
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
		if !r.hub.Online(fp, r.id(fp)) {
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

// TestIdleReadersWaitOutsideTheLibrary: between frames, an idle link's
// reader waits for data outside the WebSocket library (on a stack the
// runtime can shrink to 2 KB), and stays there through pings: the pongs of
// phones that answer are taken before the library would read them, the
// pings count as answered and the phones stay online; a frame after the
// pings is read and answered as ever.
//
// Not parallel: it reads every goroutine of the test binary, and the links
// of the other tests, running alongside, read inside the library while they
// work.
func TestIdleReadersWaitOutsideTheLibrary(t *testing.T) {
	const phones = 3
	r := newRig(t, Config{PingInterval: 50 * time.Millisecond, PongTimeout: 5 * time.Second})
	var mu sync.Mutex
	pings := map[string]int{}
	var links []*websocket.Conn
	for i := range phones {
		fp := fmt.Sprintf("idle-reader-%d", i)
		ws := r.connectHearingPings(r.pair(fp), func(context.Context, []byte) bool {
			mu.Lock()
			pings[fp]++
			mu.Unlock()
			return true
		})
		links = append(links, ws)
	}
	frames := make(chan proto.Frame, phones)
	for _, ws := range links {
		go func() { // read, so that pings are answered
			for {
				_, data, err := ws.Read(context.Background())
				if err != nil {
					return
				}
				if f, err := proto.Decode(data); err == nil {
					frames <- f
				}
			}
		}()
	}
	eventually(t, "four pings answered on every link", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range phones {
			if pings[fmt.Sprintf("idle-reader-%d", i)] < 4 {
				return false
			}
		}
		return true
	})
	eventually(t, "every link's reader waiting outside the library", func() bool {
		buf := make([]byte, 1<<20)
		readers, inside := 0, 0
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, "gateway.(*conn).readLoop") {
				continue
			}
			readers++
			if strings.Contains(g, "websocket.(*Conn).Read") {
				inside++
			}
		}
		return readers == phones && inside == 0
	})
	for i := range phones {
		if fp := fmt.Sprintf("idle-reader-%d", i); !r.hub.Online(fp, r.id(fp)) {
			t.Errorf("%s went offline while it answered pings", fp)
		}
	}
	writeRaw(t, links[0], []byte(`{"type":"no_such_frame"}`))
	select {
	case f := <-frames:
		if e, ok := f.(*proto.Error); !ok || e.Code != "unknown_frame" {
			t.Fatalf("the frame after the pings was answered %#v, want unknown_frame", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the frame after the pings was not answered")
	}
}
