package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
)

// TestPongsBehindASlowStoreKeepTheLink: a phone that reports faster than a
// slow store takes its reports fills its link's room for answers, and the
// link's reader stops reading until the store catches up; the phone's
// pongs then wait unread behind its reports. The server must not take
// that for a silent phone: the link stays up, with every job delivered,
// however much longer than the pong timeout the reader waits.
func TestPongsBehindASlowStoreKeepTheLink(t *testing.T) {
	storetest.EmbeddedOnly(t, "holds the embedded store's writer after each commit, standing in for a slow disk")
	t.Parallel()
	const pongTimeout = 150 * time.Millisecond
	r := newRigStore(t, Config{MaxInflight: 2, PingInterval: 20 * time.Millisecond, PongTimeout: pongTimeout}, time.Now,
		storetest.Options{SyncDelay: 3 * pongTimeout})
	token := r.pair("slow-store-1")
	// 3 jobs are 15 reports, the link's room 2: the reader stops several
	// times, each stop a commit held 3 pong timeouts; each held commit
	// alone drops the link if a missed pong is taken for a silent phone.
	const jobs = 3
	for range jobs {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "slow-store-1", Phone: "+15551234567", Message: "hi"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ws := r.connect(token)
	// Room for every answer the phone gets to a delivered report (three a
	// job): the phone never waits for the test to take one, so it never
	// stops reading, nor answering pings. With room for one a job it
	// waited whenever the test was slow to take them (a loaded machine),
	// its pongs then late through no fault of the server's, and the
	// server rightly dropped it.
	delivered := make(chan string, jobs*3)
	ended := make(chan error, 1)
	go func() { // the phone: reads (answering pings), and reports each job three times over at once
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				ended <- err
				return
			}
			switch f, _ := proto.Decode(data); f := f.(type) {
			case *proto.Send:
				for _, out := range []proto.Frame{proto.Ack{ID: f.ID}, proto.Status{ID: f.ID, Status: "sent"}, proto.Status{ID: f.ID, Status: "delivered"},
					proto.Status{ID: f.ID, Status: "delivered"}, proto.Status{ID: f.ID, Status: "delivered"}} {
					data, err := proto.Encode(out)
					if err == nil {
						err = ws.Write(context.Background(), websocket.MessageText, data)
					}
					if err != nil {
						ended <- err
						return
					}
				}
			case *proto.StatusAck:
				if f.Status == "delivered" {
					delivered <- f.ID
				}
			}
		}
	}()
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(seen) < jobs {
		select {
		case id := <-delivered:
			seen[id] = true
		case err := <-ended:
			t.Fatalf("the link ended after %d of %d jobs were delivered: %v\n%s", len(seen), jobs, err, r.logs.String())
		case <-deadline:
			t.Fatalf("%d of %d jobs delivered in 30 s", len(seen), jobs)
		}
	}
	if strings.Contains(r.logs.String(), "dropped by the server") {
		t.Fatalf("the server dropped a link whose pongs waited behind its reports:\n%s", r.logs.String())
	}
}

// TestPongWaitWithTheReaderBusyPartOfItKeepsTheLink: a ping sent while the
// link's reader waits for the store, whose wait ends before the pong
// timeout, leaves the reader no time to read the pong behind the report;
// the missing pong is the server's delay, and the link stays up (the next
// ping asks again). Only the reader's state at the timeout was looked at:
// a store that answered just before it dropped the link, a flake of
// TestPongsBehindASlowStoreKeepTheLink on a loaded machine ("no pong
// within 150ms" after 2 of 3 jobs). The phone here reads nothing, so no
// pong comes at all, and the test sets the reader's state itself.
func TestPongWaitWithTheReaderBusyPartOfItKeepsTheLink(t *testing.T) {
	t.Parallel()
	const pongTimeout = 2 * time.Second
	r := newRig(t, Config{PingInterval: time.Hour, PongTimeout: pongTimeout})
	token := r.pair("busy-reader-1")
	r.connect(token) // and reads no more: no pong answers the ping below
	var c *conn
	poll.Until(t, "the link registered", func() bool { c = r.hub.lookup("busy-reader-1"); return c != nil })
	l, ok := c.sock.(*linkIO)
	if !ok || l.onPong == nil {
		t.Fatal("the link's reader takes no pongs between frames")
	}
	poll.Until(t, "the reader between frames", func() bool { return !c.handling.Load() })
	// The phone silent for two ping intervals already (an hour's pings are
	// never sent here): the ping waits the pong timeout, its least.
	c.quietSince.Add(-int64(2 * time.Hour))
	type result struct{ sent, ok bool }
	done := make(chan result, 1)
	go func() {
		for {
			c.handling.Store(true) // the reader waits for the store
			// No ping is written while a frame to the phone is: the next
			// turn (the reader is set waiting again, whatever the test saw
			// of this one).
			if sent, ok := c.pingOwn(l); sent || !ok {
				done <- result{sent, ok}
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	poll.Until(t, "the ping waiting for its pong", func() bool { return c.ping.Load() != nil || len(done) > 0 })
	c.handling.Store(false) // the store answered: the reader reads again, before the pong timeout
	got := <-done
	if !got.sent || !got.ok || c.closed() {
		t.Fatalf("a ping whose wait the reader spent partly waiting for the store: sent %v, link kept %v, closed %v; want sent and kept\n%s", got.sent, got.ok, c.closed(), r.logs.String())
	}
	if strings.Contains(r.logs.String(), "dropped by the server") {
		t.Fatalf("the server dropped the link:\n%s", r.logs.String())
	}
}
