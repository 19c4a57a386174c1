package agent

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// An error frame refuses the oldest report of its id waiting on the link,
// not every report of that id (PROTOCOL.md 11.1): the plain delivered is
// refused for good while its read receipt, refused for now (retry_after),
// is kept and sent again.
func TestStatusRefusalDropsOnlyTheAnsweredReport(t *testing.T) {
	t.Parallel()
	job := proto.Send{ID: "wa-2", Channel: "whatsapp", To: "+15551234567", From: "+15550100001", Message: "hi", ContentType: "text", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		write(ctx, ws, job)
		var delivered []*proto.Status
		for f := range frames {
			st, ok := f.(*proto.Status)
			if !ok {
				continue
			}
			switch {
			case st.Status == proto.StatusSent:
				write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			case len(delivered) < 2 && link == 1:
				delivered = append(delivered, st)
				if len(delivered) == 2 { // both wait for their answer
					write(ctx, ws, proto.Error{Code: "validation_failed", Message: "status: at is invalid", ID: st.ID, Field: "at"})
					write(ctx, ws, proto.Error{Code: "unavailable", Message: "status: try again", ID: st.ID, RetryAfter: 1})
				}
			default:
				write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status, Detail: st.Detail})
			}
		}
	}
	tr := &memTransport{inbox: make(chan Received)}
	_, j, _ := startAgent(t, h, tr)
	poll.Until(t, "the job awaits its receipt", func() bool { st, _ := j.JobState("wa-2"); return st == StateAwaiting })
	tr.mu.Lock()
	sink := tr.sink
	tr.mu.Unlock()
	if err := sink.Deliver("wa-wa-2", Delivery{Final: true, Status: proto.StatusDelivered, Detail: proto.DetailRead}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the read receipt is sent again and acknowledged", func() bool {
		reports, _ := j.Reports()
		return len(reports) == 0 && h.seen(`"detail":"read"`) == 2
	})
	if n := h.seen(`"status":"delivered","at"`); n != 1 {
		t.Fatalf("plain delivered sent %d times, want once (refused for good)", n)
	}
}

// A report journaled again under the key of one status_acked on this link
// is a new record and goes on the same link, not only after a reconnect:
// the pump sends each journal record once per link, not each key.
func TestReportJournaledAgainIsSentOnTheSameLink(t *testing.T) {
	t.Parallel()
	job := proto.Send{ID: "wa-3", Channel: "whatsapp", To: "+15551234567", From: "+15550100001", Message: "hi", ContentType: "text", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		if link == 1 {
			write(ctx, ws, job)
		}
		for f := range frames {
			if st, ok := f.(*proto.Status); ok {
				write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status, Detail: st.Detail})
			}
		}
	}
	tr := &memTransport{inbox: make(chan Received)}
	a, j, _ := startAgent(t, h, tr)
	poll.Until(t, "the sent report is acknowledged", func() bool {
		st, _ := j.JobState("wa-3")
		reports, _ := j.Reports()
		return st == StateAwaiting && len(reports) == 0 && h.seen(`"status":"sent"`) == 1
	})
	again := proto.Status{ID: "wa-3", Status: proto.StatusSent, At: stamp(time.Now())}
	if err := j.db.Update(func(tx *bolt.Tx) error { return addReport(tx, again) }); err != nil {
		t.Fatal(err)
	}
	wake(a.pumpWake)
	poll.Until(t, "the report journaled again is sent and acknowledged", func() bool {
		reports, _ := j.Reports()
		return len(reports) == 0 && h.seen(`"status":"sent"`) == 2
	})
	h.mu.Lock()
	links := h.links
	h.mu.Unlock()
	if links != 1 {
		t.Fatalf("links: %d, want the report sent again on the first", links)
	}
}

// A retry_after so large that it overflowed a duration (2^55 seconds
// wrapped to exactly 0) is still a temporary refusal: the report is kept
// and sent again on the next link. It read as no retry_after, and the
// report was dropped for good.
func TestHugeRetryAfterKeepsTheReport(t *testing.T) {
	t.Parallel()
	job := proto.Send{ID: "job-h", Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		if link == 1 {
			write(ctx, ws, job)
		}
		for f := range frames {
			st, ok := f.(*proto.Status)
			if !ok {
				continue
			}
			if link == 1 {
				write(ctx, ws, proto.Error{Code: "unavailable", Message: "status: try again", ID: st.ID, RetryAfter: 1 << 55})
				ws.Close(websocket.StatusGoingAway, "going away")
				return
			}
			write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status})
		}
	}
	_, j, _ := startAgent(t, h, &memTransport{inbox: make(chan Received)})
	poll.Until(t, "the report is sent again on the next link and acknowledged", func() bool {
		reports, _ := j.Reports()
		return len(reports) == 0 && h.seen(`"status":"sent"`) == 2
	})
}
