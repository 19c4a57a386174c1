package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
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

// A window's worth of priority jobs that are not to be sent (their number
// opted out after they were queued) comes back from every read of the
// queue until the store's next commit fails them: they move no cursor.
// The pump reads past them once and sends the plain job behind them; it
// read the same jobs again and again, holding the link's pump (and the
// send or ack that pumped) for as long as that commit took, and sent
// nothing meanwhile.
func TestPumpReadsPastUnsendablePriorityJobs(t *testing.T) {
	storetest.EmbeddedOnly(t, "holdCommits holds the single writer every commit queues behind; PostgreSQL fails the jobs before its read returns")
	t.Parallel()
	r := newRig(t, Config{MaxInflight: 2})
	token := r.pair("pixel-1")
	ctx := context.Background()
	for i := range 2 {
		if _, _, err := r.sms.Send(ctx, sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15557654321", Message: fmt.Sprint("urgent ", i), Priority: 9}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := r.sms.AddOptOut(ctx, r.company, "+15557654321"); err != nil {
		t.Fatal(err)
	}
	plain, _, err := r.sms.Send(ctx, sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "plain"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The commit that fails the priority jobs waits behind a held one,
	// as behind a slow disk's fsync.
	var release func()
	var once sync.Once
	hold := func() { once.Do(func() { release = r.holdCommits() }) }
	r.beforeRead.Store(&hold)
	defer func() {
		once.Do(func() {}) // after the hold, if the link made it
		if release != nil {
			release()
		}
	}()
	ws := r.connect(token)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.ID != plain.UUID {
		t.Fatalf("got %#v, want the plain job %s", s, plain.UUID)
	}
	if n := r.reads.Load(); n > 3 {
		t.Fatalf("the link read its queue %d times for one pump", n)
	}
}
