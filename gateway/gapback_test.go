package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// pausedAtHandOut is the agent channels with the number paused (as through
// the API) just before the first hand-out: the store refuses that hand-out,
// as it refuses one that lost a race with another agent or node.
type pausedAtHandOut struct {
	*channel.Service
	once  sync.Once
	pause func()
}

func (a *pausedAtHandOut) HandOut(ctx context.Context, dev store.Device, seq uint64) (bool, error) {
	a.once.Do(a.pause)
	return a.Service.HandOut(ctx, dev, seq)
}

// A job whose hand-out the store refused went to no agent: it gives the
// number's gap back, and the number's next job goes as soon as the number
// may send again, not one gap later. The gap of a job that went still
// holds the next one back. The agents' clock stands still: the job
// refused, once the number is resumed, waited a whole gap (an hour here)
// for nothing.
func TestAgentHandOutRefusedGivesTheGapBack(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	token := w.pair("gap-agent")
	clock := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	var wrapped *pausedAtHandOut
	node := w.startWith(moveOptions{now: clock.Now, gap: pacing.Gap{Min: time.Hour, Max: time.Hour},
		wrap: func(s *channel.Service) Agents {
			wrapped = &pausedAtHandOut{Service: s}
			return wrapped
		}})
	setStatus := func(status string) {
		t.Helper()
		nums, err := node.agents.Numbers(context.Background(), w.company, channel.WhatsApp)
		if err != nil || len(nums) != 1 {
			t.Fatalf("numbers: %v (%v), want the one", nums, err)
		}
		if _, err := node.agents.Update(context.Background(), w.company, channel.WhatsApp, nums[0].PublicID, channel.Patch{Status: &status}); err != nil {
			t.Fatalf("set the number %s: %v", status, err)
		}
	}
	paused := make(chan struct{})
	wrapped.pause = func() {
		setStatus(store.NumberPaused)
		close(paused)
	}
	ws := node.link(token, moveNumber)
	refused := node.send("refused at its hand-out")
	<-paused
	setStatus(store.NumberActive) // kicks the link
	if s := nextSend(t, ws); s.ID != refused {
		t.Fatalf("got %s, want %s, whose hand-out was refused", s.ID, refused)
	}
	reported(t, ws, refused)
	// That job went: its gap holds the next one back.
	dev, err := w.st.CompanyDevice(w.company, "gap-agent")
	if err != nil {
		t.Fatal(err)
	}
	nums, err := node.agents.Numbers(context.Background(), w.company, channel.WhatsApp)
	if err != nil || len(nums) != 1 {
		t.Fatalf("numbers: %v (%v), want the one", nums, err)
	}
	if turn, wait, err := node.agents.Ready(dev, nums[0].ID); wait != time.Hour || turn != nil || err != nil {
		t.Fatalf("right after the job went: turn %v, wait %v (%v), want an hour", turn, wait, err)
	}
}
