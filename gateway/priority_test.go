package gateway

import (
	"context"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/sms"
)

// A priority job queued while the link's window is full goes out at the
// next free place, before the plain job queued earlier; the link then
// sends the plain job, and never the priority job again while it waits
// for its ack.
func TestPriorityJobOvertakesTheQueueOnALiveLink(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{MaxInflight: 2})
	token := r.pair("pixel-1")
	send := func(text string, priority int) string {
		m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: text, Priority: priority}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m.UUID
	}
	n1, n2, n3 := send("n1", 0), send("n2", 0), send("n3", 0)
	ws := r.connect(token)
	next := func(want, what string) {
		t.Helper()
		if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.ID != want {
			t.Fatalf("%s: got %#v, want the job %s", what, s, want)
		}
	}
	next(n1, "first")
	next(n2, "second")
	urgent := send("urgent", 9)
	writeFrame(t, ws, proto.Ack{ID: n1})
	next(urgent, "the place n1's ack freed")
	writeFrame(t, ws, proto.Ack{ID: n2})
	next(n3, "the place n2's ack freed")
	writeFrame(t, ws, proto.Ack{ID: urgent})
	writeFrame(t, ws, proto.Ack{ID: n3})
	n4 := send("n4", 0)
	next(n4, "after every ack") // nothing sent twice before it
}
