package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// fleet is the connected phones.
type fleet struct {
	phones   []*client.Phone
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	received atomic.Int64
	sent     sync.Map // message text -> time the send started
	lat      chan time.Duration
	// upAt is when each phone's link last came up (Unix nanoseconds): the
	// cluster's failover phase reads it after a node's death.
	upAt []atomic.Int64
}

// connect links the phones, phone i to bases[i%len(bases)] (one server, or
// the nodes of a cluster in turn).
func connect(ctx context.Context, bases []string, fps, tokens []string) (*fleet, error) {
	return connectBackoff(ctx, bases, fps, tokens, 100*time.Millisecond, 2*time.Second)
}

// connectBackoff is connect with the phones' reconnect backoff (base and
// ceiling): short for the phases that only start links, the reference
// client's own where a reconnect is timed.
func connectBackoff(ctx context.Context, bases []string, fps, tokens []string, backoffBase, backoffMax time.Duration) (*fleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel, lat: make(chan time.Duration, 1<<20), upAt: make([]atomic.Int64, len(fps))}
	clients := make([]*http.Client, 200)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i))}}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	var up atomic.Int64
	for i := range fps {
		base := bases[i%len(bases)]
		p := client.New(client.Config{
			WSURL: "ws" + base[len("http"):] + "/device/ws", Token: tokens[i], HTTPClient: clients[i%len(clients)],
			BackoffBase: backoffBase, BackoffMax: backoffMax,
			Hello: proto.Hello{AppVersion: "bench", SelectedSIM: proto.BothSIMs, SIMs: []proto.SIM{{Slot: proto.SIM1}}},
			OnJob: func(s proto.Send) {
				f.received.Add(1)
				if t, ok := f.sent.LoadAndDelete(s.Message); ok {
					select {
					case f.lat <- time.Since(t.(time.Time)):
					default:
					}
				}
			},
			OnState: func(ok bool, _ error) {
				if ok {
					f.upAt[i].Store(time.Now().UnixNano())
					up.Add(1)
				}
			},
		})
		f.phones = append(f.phones, p)
		f.wg.Go(func() { _ = p.Run(ctx) })
		// Connect in waves so that the accept queue never overflows.
		if (i+1)%500 == 0 {
			deadline := time.Now().Add(60 * time.Second)
			for up.Load() < int64(i+1) && time.Now().Before(deadline) && sleep(ctx, 10*time.Millisecond) {
			}
		}
	}
	deadline := time.Now().Add(120 * time.Second)
	for up.Load() < int64(len(fps)) {
		if time.Now().After(deadline) || !sleep(ctx, 10*time.Millisecond) {
			f.stop()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("bench: only %d of %d phones connected", up.Load(), len(fps))
		}
	}
	return f, nil
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}
