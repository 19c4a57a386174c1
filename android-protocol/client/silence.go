package client

import (
	"sync"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Silence tells a link that has heard nothing for two ping intervals
// (PROTOCOL.md section 6) that it is dead. Hear records that something
// arrived (a frame, a ping); Watch arms a timer, re-armed from the last thing
// heard, that calls dead once the link has been quiet too long: no goroutine
// per idle link. The reference client and simrelay-agent both use it.
type Silence struct {
	mu   sync.Mutex
	last time.Time
}

// NewSilence starts counting from now.
func NewSilence() *Silence { return &Silence{last: time.Now()} }

// Hear records that the link heard something now.
func (s *Silence) Hear() {
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
}

// Watch calls dead after two ping intervals without a Hear; stop ends the
// watch. The interval is bounded as proto.Welcome.PingInterval bounds it
// (45 s when none, at most an hour), so its double never overflows.
func (s *Silence) Watch(pingInterval time.Duration, dead func()) (stop func()) {
	if pingInterval <= 0 {
		pingInterval = proto.DefaultPingIntervalSeconds * time.Second
	}
	pingInterval = min(pingInterval, proto.MaxPingIntervalSeconds*time.Second)
	limit := 2 * pingInterval
	var watch *time.Timer
	watch = time.AfterFunc(time.Hour, func() {
		s.mu.Lock()
		quiet := time.Since(s.last)
		s.mu.Unlock()
		if quiet > limit {
			dead()
			return
		}
		watch.Reset(limit - quiet + time.Millisecond)
	})
	watch.Reset(limit) // armed in two steps, so watch is set before the func can run
	return func() { watch.Stop() }
}
