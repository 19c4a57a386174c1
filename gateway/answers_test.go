package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// holdCommits stops the store's group commit until the returned func is
// called: a send whose device check (run inside the commit) waits. It is
// what a slow fsync looks like to everything queued behind it.
func (r *rig) holdCommits() (release func()) { return r.holdCommitsOf("pixel-1") }

// holdCommitsOf is holdCommits with the held send's job for device.
func (r *rig) holdCommitsOf(device string) (release func()) {
	r.t.Helper()
	entered, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		m := store.Message{UUID: "held-commit-" + fmt.Sprint(r.holds.Add(1)), CompanyID: r.company, Device: device, Channel: proto.ChannelSMS, Phone: "+15550000000", Text: "held", SIMSlot: proto.SIM1}
		_, _, _ = r.store.Enqueue(&m, store.IdempotencyKey{}, time.Now, func(store.Device, string) error { close(entered); <-free; return nil }, nil)
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
	storetest.EmbeddedOnly(t, "holdCommits holds the single writer every commit queues behind; PostgreSQL's commits do not queue")
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
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer in 30 s, want %+v", w)
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

// While three frames per place of its window wait for their answers, a
// link reads no more: what a phone can make the server hold is bounded.
func TestALinkStopsReadingAtItsLimitOfUnansweredFrames(t *testing.T) {
	storetest.EmbeddedOnly(t, "holdCommits holds the single writer every commit queues behind; PostgreSQL's commits do not queue")
	t.Parallel()
	r := newRig(t, Config{MaxInflight: 1}) // room for 3 unanswered frames
	token := r.pair("pixel-1")
	m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := r.connect(token)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.ID != m.UUID {
		t.Fatalf("got %#v, want the job %s", s, m.UUID)
	}
	in := frames(t, ws)

	release := r.holdCommits()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	writeFrame(t, ws, proto.Ack{ID: m.UUID})
	writeFrame(t, ws, proto.Status{ID: m.UUID, Status: proto.StatusSent})
	writeFrame(t, ws, proto.Status{ID: m.UUID, Status: proto.StatusDelivered})
	writeFrame(t, ws, proto.Status{ID: m.UUID, Status: proto.StatusDelivered}) // read, then held: no room
	// Nothing can answer the ping while the reader waits for room: this
	// waits for an answer that must not come, so a slow machine can only
	// make the test pass, never fail.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = ws.Ping(ctx)
	cancel()
	if err == nil {
		t.Fatal("the ping was answered behind four unanswered frames, want the reader held at three")
	}

	release()
	released = true
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ws.Ping(ctx); err != nil {
		t.Fatalf("ping once the commit is done: %v", err)
	}
	for acks := 0; acks < 3; {
		select {
		case f := <-in:
			switch f.(type) {
			case *proto.StatusAck:
				acks++
			case *proto.Send: // the held commit's own job
			default:
				t.Fatalf("got %#v, want status_ack", f)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("want three status_acks once the commit is done")
		}
	}
}

// A phone acking a backlog as fast as it comes has its window refilled a
// half window at a time, not one read of the queue per ack: the acks of a
// commit free their places together, and the refill reads them in one go.
func TestWindowRefilledByHalves(t *testing.T) {
	storetest.EmbeddedOnly(t, "a round's acks share one commit behind the held single writer; PostgreSQL commits each on its own")
	t.Parallel()
	const window, rounds = 16, 4
	r := newRig(t, Config{MaxInflight: window})
	token := r.pair("pixel-1")
	r.pair("pixel-2") // not linked: the held commit's job waits for it
	for i := range window * rounds {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: fmt.Sprint("m", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ws := r.connect(token)
	in := frames(t, ws)
	next := func() string {
		t.Helper()
		select {
		case f, ok := <-in:
			s, isSend := f.(*proto.Send)
			if !ok || !isSend {
				t.Fatalf("got %#v, want a job", f)
			}
			return s.ID
		case <-time.After(30 * time.Second):
			t.Fatal("no job in 30 s")
		}
		return ""
	}
	ids := make([]string, window)
	var all []string
	for i := range ids {
		ids[i] = next()
	}
	all = append(all, ids...)
	before := r.reads.Load()
	for round := range rounds {
		// The round's acks share one commit, as a phone's stream of acks does.
		release := r.holdCommitsOf("pixel-2")
		for _, id := range ids {
			writeFrame(t, ws, proto.Ack{ID: id})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ws.Ping(ctx) // the pong comes from the reader, behind the acks
		cancel()
		release()
		if err != nil {
			t.Fatal(err)
		}
		if round < rounds-1 {
			for i := range ids {
				ids[i] = next()
			}
			all = append(all, ids...)
		}
	}
	for _, id := range all {
		eventually(t, "every job sending", func() bool {
			m, err := r.store.MessageByUUID(r.company, id)
			return err == nil && m.Status == store.MsgSending
		})
	}
	// Two reads a round (a half window each), and one more at the end,
	// which finds the queue empty; one read per ack would be 64.
	if reads := r.reads.Load() - before; reads > 3*rounds {
		t.Fatalf("refilling the window after %d acks took %d reads of the queue, want at most %d", window*rounds, reads, 3*rounds)
	}
}

// A report naming an id no job can have (longer than proto.MaxEchoBytes:
// job ids are UUIDs) is refused at once, without a place in the store's
// commit. A link's reports waiting for their commit (3 x max_inflight of
// them) then hold only what their answers need, not frames of up to
// 64 KiB: an ack's id, or a status's error text, went whole into the
// commit's queue and stayed there, and in its answer, until it was durable.
func TestReportOfAnIDNoJobHasIsRefusedWithoutTheStore(t *testing.T) {
	storetest.EmbeddedOnly(t, "holdCommits holds the single writer every commit queues behind; PostgreSQL's commits do not queue")
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	in := frames(t, ws)
	release := r.holdCommits()
	defer release()
	long := strings.Repeat("x", 60<<10)
	writeFrame(t, ws, proto.Ack{ID: long})
	writeFrame(t, ws, proto.Status{ID: long, Status: proto.StatusSent})
	for i := range 2 {
		select {
		case f := <-in:
			if e, ok := f.(*proto.Error); !ok || e.Code != "not_found" || e.ID != long[:proto.MaxEchoBytes] {
				t.Fatalf("report %d: got %#v, want error not_found naming the id's first %d bytes", i, f, proto.MaxEchoBytes)
			}
		case <-time.After(poll.Timeout):
			t.Fatalf("report %d: no answer while the store's commit waits", i)
		}
	}
}
