package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
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
	delivered := make(chan string, jobs)
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
