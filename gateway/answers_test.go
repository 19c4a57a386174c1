package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// holdCommits stops the store's group commit until the returned func is
// called: a send whose device check (run inside the commit) waits. It is
// what a slow fsync looks like to everything queued behind it.
func (r *rig) holdCommits() (release func()) {
	r.t.Helper()
	entered, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		m := store.Message{UUID: "held-commit", CompanyID: r.company, Device: "pixel-1", Channel: proto.ChannelSMS, Phone: "+15550000000", Text: "held", SIMSlot: proto.SIM1}
		_, _, _ = r.store.Enqueue(&m, "", time.Now, func(store.Device) error { close(entered); <-free; return nil }, nil)
	}()
	<-entered
	return func() { close(free); <-done }
}

// frames reads the link's frames into a channel until it ends; a reader
// must run for the client's pings to get their pongs.
func frames(t *testing.T, ws *websocket.Conn) <-chan proto.Frame {
	out := make(chan proto.Frame, 64)
	go func() {
		defer close(out)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if f, err := proto.Decode(data); err == nil {
				out <- f
			}
		}
	}()
	t.Cleanup(func() { ws.CloseNow() })
	return out
}

// A link reads the phone's next frames while its reports wait for their
// commit, answers none of them before it is durable, and then answers them
// in the order they came.
func TestReportsArePipelinedAndAnsweredAfterTheirCommit(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	token := r.pair("pixel-1")
	var ids []string
	for i := range 2 {
		m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: fmt.Sprint("m", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.UUID)
	}
	ws := r.connect(token)
	for _, id := range ids {
		if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.ID != id {
			t.Fatalf("got %#v, want the job %s", s, id)
		}
	}
	in := frames(t, ws)

	release := r.holdCommits()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	for _, id := range ids {
		writeFrame(t, ws, proto.Ack{ID: id})
		writeFrame(t, ws, proto.Status{ID: id, Status: proto.StatusSent})
		writeFrame(t, ws, proto.Status{ID: id, Status: proto.StatusDelivered})
	}
	// The pong comes from the server's reader, behind the six reports.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ws.Ping(ctx); err != nil {
		t.Fatalf("ping behind reports waiting for their commit: %v; want the link to read on", err)
	}
	select {
	case f := <-in:
		t.Fatalf("got %#v before the commit, want no answer until the reports are durable", f)
	default:
	}

	release()
	released = true
	want := []proto.StatusAck{{ID: ids[0], Status: proto.StatusSent}, {ID: ids[0], Status: proto.StatusDelivered}, {ID: ids[1], Status: proto.StatusSent}, {ID: ids[1], Status: proto.StatusDelivered}}
	for _, w := range want {
		var got proto.Frame
		for got == nil {
			select {
			case f, ok := <-in:
				if !ok {
					t.Fatal("the link ended before the answers")
				}
				if _, isSend := f.(*proto.Send); !isSend { // the held commit's own job
					got = f
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no answer in 5 s, want %+v", w)
			}
		}
		if a, ok := got.(*proto.StatusAck); !ok || *a != w {
			t.Fatalf("got %#v, want %+v: answers in the order of the reports", got, w)
		}
	}
	for _, id := range ids {
		m, err := r.store.MessageByUUID(r.company, id)
		if err != nil || m.Status != store.MsgDelivered {
			t.Fatalf("job %s: got %q, %v; want delivered", id, m.Status, err)
		}
	}
}
