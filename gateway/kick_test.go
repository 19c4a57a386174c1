package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// pausedRead is the intake whose next read of the SMS queue, once armed,
// tells read when it has read and then waits for proceed before it
// answers: a pump that took its jobs and has not written them yet.
type pausedRead struct {
	Intake
	armed   atomic.Bool
	read    chan struct{}
	proceed chan struct{}
}

func (p *pausedRead) Pending(ctx context.Context, dev store.Device, after uint64, limit int) ([]sms.Job, error) {
	jobs, err := p.Intake.Pending(ctx, dev, after, limit)
	if p.armed.CompareAndSwap(true, false) {
		p.read <- struct{}{}
		<-p.proceed
	}
	return jobs, err
}

// kicksPumped waits until the device's link has pumped for every kick it
// was given (its pump goroutine, conn.pumpKicks, ended), and every link's
// first pump is done (the hub's set-up goroutines ended). A kick returns
// before its pump; a test that counts a kick's reads waits for them here.
func kicksPumped(t testing.TB, h *Hub, fingerprint string) {
	t.Helper()
	c := h.lookup(fingerprint)
	if c == nil {
		t.Fatalf("no link of %s", fingerprint)
	}
	poll.Until(t, "the kicks of "+fingerprint+" pumped", func() bool {
		c.kmu.Lock()
		defer c.kmu.Unlock()
		return !c.kicking && h.tasks[taskSetup].Load() == 0
	})
}

// A kick (a send's) returns at once, whatever the link's pump does: the
// link pumps on a goroutine of its own. And a kick that comes while that
// pump has read the queue and not yet written what it found is not lost:
// the job it was for, stored after that read, reaches the phone once the
// pump goes on.
func TestKickDoesNotWaitForThePumpAndIsNotLost(t *testing.T) {
	t.Parallel()
	paused := &pausedRead{read: make(chan struct{}, 1), proceed: make(chan struct{})}
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{PingInterval: time.Hour}, time.Now, nil, hubSetup{
		intake: func(in Intake) Intake { paused.Intake = in; return paused }})
	ws := r.connect(r.pair("pixel-1"))
	proceeded := false
	proceed := func() {
		if !proceeded {
			proceeded = true
			close(paused.proceed)
		}
	}
	t.Cleanup(proceed)
	kicksPumped(t, r.hub, "pixel-1") // and its first pump, at its set-up's end

	paused.armed.Store(true)
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "first"}, nil); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-queued:
	case <-time.After(poll.Timeout):
		proceed()
		t.Fatal("the send waited for its link's read of the queue")
	}
	select {
	case <-paused.read: // the kick's pump read the queue: "first" only
	case <-time.After(poll.Timeout):
		t.Fatal("the kick did not pump the link")
	}
	r.queue("pixel-1", "second") // its kick comes while that pump holds what it read
	proceed()
	for _, want := range []string{"first", "second"} {
		if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != want {
			t.Fatalf("got %#v, want the job %q", s, want)
		}
	}
}
