package agent

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// The device's date set after the welcome (a Raspberry Pi without a
// battery clock starts two days behind, and NTP sets the date a moment
// after the link is up) does not move the server's clock the agent checks
// expiry against: a job that expires in an hour is sent, not failed as
// expired.
func TestDateSetAfterTheWelcomeDoesNotExpireJobs(t *testing.T) {
	t.Parallel()
	var behind atomic.Int64 // how far the device's date is behind
	behind.Store(int64(48 * time.Hour))
	stepped := make(chan struct{})
	job := proto.Send{ID: "job-1", Channel: proto.ChannelSMS, To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1, ExpiresAt: stamp(time.Now().Add(time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(_ int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		<-stepped
		write(ctx, ws, job)
		for f := range frames {
			if st, ok := f.(*proto.Status); ok {
				write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			}
		}
	}
	tr := &memTransport{inbox: make(chan Received)}
	a, _, _ := startAgentSet(t, h, tr, filepath.Join(t.TempDir(), "j.db"), func(a *Agent) {
		wall := func() time.Time { return time.Now().Add(-time.Duration(behind.Load())) }
		booted := time.Now()
		a.clock = clocks{wall: wall, boot: func() time.Duration { return time.Since(booted) }} // setting the date moves no boot clock
	})
	poll.Until(t, "the welcome's server time is taken", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return !a.serverAt.IsZero()
	})
	behind.Store(0) // NTP sets the date
	close(stepped)
	poll.Until(t, "the job's report", func() bool { return h.seen(`"id":"job-1","status"`) > 0 })
	if n := h.seen(`"type":"status","id":"job-1","status":"sent"`); n != 1 || tr.count(job.ID) != 1 {
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("the job: %d sent reports, carried out %d times; want it sent once (frames %v)", n, tr.count(job.ID), h.frames)
	}
}

// The real boot clock counts in nanoseconds, forward: the server's clock
// read after a welcome stays with the date while the date is not set.
func TestServerClockFollowsTheBootClock(t *testing.T) {
	t.Parallel()
	a := New(Options{})
	before := time.Now()
	a.synced(before)
	poll.Until(t, "the server's clock passes a millisecond", func() bool {
		return a.serverNow().Sub(before) >= time.Millisecond
	})
	if now, server := time.Now(), a.serverNow(); server.Before(before) || server.After(now.Add(time.Second)) {
		t.Fatalf("server clock %v, want between %v and %v", server, before, now)
	}
}
