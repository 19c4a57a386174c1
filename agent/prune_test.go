package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A running agent forgets a finished job once its report was acknowledged
// and its expires_at is 24 hours past, as it does at start: one that runs
// for months without a restart does not keep every job it ever took.
func TestRunningAgentPrunesFinishedJobs(t *testing.T) {
	t.Parallel()
	old := proto.Send{ID: "job-old", Channel: proto.ChannelSMS, To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1, ExpiresAt: stamp(time.Now().Add(-48 * time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(_ int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		write(ctx, ws, old)
		for f := range frames {
			if st, ok := f.(*proto.Status); ok {
				write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			}
		}
	}
	_, j, _ := startAgentSet(t, h, &memTransport{inbox: make(chan Received)}, filepath.Join(t.TempDir(), "j.db"), func(a *Agent) {
		a.pruneEvery = 10 * time.Millisecond
	})
	poll.Until(t, "the expired job is reported and its report acknowledged", func() bool {
		return h.seen(`"type":"status","id":"job-old","status":"failed"`) > 0
	})
	poll.Until(t, "the finished job is forgotten while the agent runs", func() bool {
		st, err := j.JobState(old.ID)
		return err == nil && st == ""
	})
}
