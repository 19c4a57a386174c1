package agent

import (
	"context"
	"sync"
	"time"
)

// DefaultPerMinute is the agent's own SMS pace, in message parts per
// minute: Android lets one app send about 30 parts a minute before it asks
// the user (PROTOCOL.md 17.4), and 25 keeps a margin for parts other apps
// or a retry add. A modem has no such quota but the carrier may; the same
// default is safe there.
const DefaultPerMinute = 25

// Pacer spaces sends evenly: one part every minute/perMinute, so no
// rolling minute ever holds more than perMinute parts.
type Pacer struct {
	gap  time.Duration
	mu   sync.Mutex
	next time.Time
}

// NewPacer returns a pacer for perMinute parts a minute; 0 or less means
// no pacing (nil).
func NewPacer(perMinute int) *Pacer {
	if perMinute <= 0 {
		return nil
	}
	return &Pacer{gap: time.Minute / time.Duration(perMinute)}
}

// Wait blocks until parts more parts may go, and books them.
func (p *Pacer) Wait(ctx context.Context, parts int) error {
	p.mu.Lock()
	now := time.Now()
	start := p.next
	if start.Before(now) {
		start = now
	}
	p.next = start.Add(time.Duration(max(parts, 1)) * p.gap)
	p.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
