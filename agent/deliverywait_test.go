package agent

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// failingDelivery is a transport whose delivery check always fails (a
// modem gone for good, a database the agent may no longer read).
type failingDelivery struct {
	memTransport
	asked atomic.Int64
}

func (f *failingDelivery) Delivery(context.Context, string) (Delivery, error) {
	f.asked.Add(1)
	return Delivery{}, errors.New("the device does not answer")
}

// A sent job whose delivery check keeps failing is waited for as long as
// one whose report does not come (DefaultDeliveryWait), and then stays
// sent: it was asked about every poll for good, and kept in the journal,
// which never prunes an awaiting job.
func TestDeliveryWaitEndsWhenTheCheckKeepsFailing(t *testing.T) {
	t.Parallel()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	send := func(id string, at time.Time) {
		t.Helper()
		s := proto.Send{ID: id, Channel: proto.ChannelSMS, To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1, ExpiresAt: stamp(at.Add(time.Hour))}
		if _, err := j.Take(s, at); err != nil {
			t.Fatal(err)
		}
		if err := j.Dispatch(id, at); err != nil {
			t.Fatal(err)
		}
		if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusSent, At: stamp(at)}, "ref-"+id, true, at); err != nil {
			t.Fatal(err)
		}
	}
	send("job-old", time.Now().Add(-DefaultDeliveryWait-time.Hour))
	send("job-new", time.Now())
	tr := &failingDelivery{memTransport: memTransport{inbox: make(chan Received)}}
	a := New(Options{Transport: tr, Journal: j, DeliveryPoll: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.deliveryPoller(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, "the job whose report could not be read for 72 hours stops being awaited", func() bool {
		st, err := j.JobState("job-old")
		return err == nil && st == StateDone
	})
	poll.Until(t, "the delivery is asked again", func() bool { return tr.asked.Load() > 4 })
	if st, err := j.JobState("job-new"); err != nil || st != StateAwaiting {
		t.Errorf("a job sent just now: %q %v, want it still awaiting its report", st, err)
	}
}
