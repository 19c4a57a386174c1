package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// vphone is one paired phone whose links may go to any node (the reference
// client, as `simrelay phone` runs it); it counts each job id it received
// over all its links (the phone's journal dedupes by id, so distinct ids
// are what reached it as SMS; more than one on the wire is a duplicate the
// journal absorbed).
type vphone struct {
	token string
	mu    sync.Mutex
	wire  map[string]int // job id -> times received on the wire; guarded by mu
}

// got says whether the phone received job id.
func (v *vphone) got(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.wire[id] > 0
}

// link is one link of a phone to one server, until stop: the close codes
// that ended its connections and the device names of its config frames.
type link struct {
	phone  *vphone
	ph     *client.Phone
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	closes []int    // guarded by mu
	names  []string // guarded by mu
}

// linkRouted links a new phone of token to the server at url until the
// test ends, with the hello's agent numbers if one is given.
func linkRouted(t *testing.T, url, token string, hello ...proto.Hello) *link {
	t.Helper()
	return (&vphone{token: token, wire: map[string]int{}}).linkURL(t, url, hello...)
}

// linkTo links the phone to node s.
func (v *vphone) linkTo(t *testing.T, s *server) *link { t.Helper(); return v.linkURL(t, s.url) }

// linkURL links the phone to the server at url until stop or the test's
// end. Each job is counted, acked, then reported sent and delivered, as a
// real phone does. A link closed with 4009 (the phone linked elsewhere)
// stays down rather than take the device back after its wait, and one
// closed with a code the phone must not retry (4503) ends.
func (v *vphone) linkURL(t *testing.T, url string, hello ...proto.Hello) *link {
	t.Helper()
	var h proto.Hello
	if len(hello) > 0 {
		h = hello[0]
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{phone: v, done: make(chan error, 1), cancel: cancel}
	l.ph = client.New(client.Config{WSURL: "ws" + strings.TrimPrefix(url, "http") + "/device/ws", Token: v.token, Hello: h,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(job proto.Send) {
			v.mu.Lock()
			v.wire[job.ID]++
			v.mu.Unlock()
			l.ph.Report(job.ID, proto.StatusSent, "")
			l.ph.Report(job.ID, proto.StatusDelivered, "")
		},
		OnConfig: func(c proto.Config) {
			l.mu.Lock()
			l.names = append(l.names, c.DeviceName)
			l.mu.Unlock()
		},
		OnRetry: func(err error, _ time.Duration) {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				l.closed(int(ce.Code))
				if int(ce.Code) == proto.CloseReplaced {
					cancel()
				}
			}
		},
	})
	go func() {
		err := l.ph.Run(ctx)
		var ce *client.ClosedError
		if errors.As(err, &ce) {
			l.closed(ce.Code)
		}
		l.done <- err
	}()
	t.Cleanup(l.stop)
	waitFor(t, "the phone links to "+url, l.ph.Connected)
	return l
}

func (l *link) closed(code int) {
	l.mu.Lock()
	l.closes = append(l.closes, code)
	l.mu.Unlock()
}

// stop ends the link and waits for its goroutine.
func (l *link) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
		l.cancel = nil
	}
}

func (l *link) closedWith(code int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.closes, code)
}

func (l *link) named(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.names, name)
}

// got says whether the phone received job id, on this link or another.
func (l *link) got(id string) bool { return l.phone.got(id) }
