package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// slowRecoverTransport looks for a job's outcome until its context ends,
// as a tool killed by a shutdown does: it cannot tell then.
type slowRecoverTransport struct {
	memTransport
	asked chan struct{}
}

func (s *slowRecoverTransport) Recover(ctx context.Context, _ Job) (Outcome, bool) {
	close(s.asked)
	<-ctx.Done()
	return Outcome{}, false
}

// A job dispatched before a crash whose outcome the transport was still
// looking for when the agent was stopped stays dispatched: the next start
// asks the transport again, which may prove it went out. It is not
// reported failed with outcome_unknown because of the stop.
func TestRecoveryCutShortByAStopIsLeftForTheNextStart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	job := proto.Send{ID: "job-1", Channel: proto.ChannelSMS, To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1, ExpiresAt: stamp(time.Now().Add(time.Hour))}
	if _, err := j.Take(job, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := j.Dispatch(job.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	tr := &slowRecoverTransport{memTransport: memTransport{inbox: make(chan Received)}, asked: make(chan struct{})}
	a := New(Options{Config: ConfigFile{WSURL: "ws://127.0.0.1:1/device/ws", DeviceToken: "dt_test", Salt: "s1"},
		Transport: tr, Journal: j, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { a.Run(ctx); close(finished) }()
	select {
	case <-tr.asked:
	case <-time.After(poll.Timeout):
		cancel()
		t.Fatal("the transport was not asked about the dispatched job")
	}
	cancel()
	<-finished
	if st, err := j.JobState(job.ID); err != nil || st != StateDispatched {
		t.Fatalf("job state after the stop: %q, %v; want %q", st, err, StateDispatched)
	}
	if reports, err := j.Reports(); err != nil || len(reports) != 0 {
		t.Fatalf("reports after the stop: %+v, %v; want none", reports, err)
	}
}
