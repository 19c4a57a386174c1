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

// Pacer spaces sends evenly, one part every minute/perMinute, and keeps
// every rolling minute within perMinute parts. A message's parts all go at
// once (Android counts them so, in its own rolling minute), so the even
// spacing alone did not: a message of 24 parts followed 57.6 s later by
// another put 48 parts in one minute. A send waits until the parts sent in
// the minute before it leave room for its own; one of more parts than
// perMinute waits for a minute without any.
type Pacer struct {
	per  int
	gap  time.Duration
	mu   sync.Mutex
	next time.Time
	// sent are the sends of the last minute (or booked), oldest first.
	sent []*sendMark
}

// sendMark is one send's parts and when they went: the moment booked,
// then the moment the send ended (done), as the device counts them no
// earlier than that.
type sendMark struct {
	at    time.Time
	parts int
}

// NewPacer returns a pacer for perMinute parts a minute; 0 or less means
// no pacing (nil).
func NewPacer(perMinute int) *Pacer {
	if perMinute <= 0 {
		return nil
	}
	return &Pacer{per: perMinute, gap: time.Minute / time.Duration(perMinute)}
}

// Wait blocks until parts more parts may go, and books them; done, called
// once the send ended, dates them to that moment.
func (p *Pacer) Wait(ctx context.Context, parts int) (done func(), err error) {
	now := time.Now()
	at, m := p.book(now, parts)
	done = func() {
		p.mu.Lock()
		if t := time.Now(); t.After(m.at) {
			m.at = t
		}
		p.mu.Unlock()
	}
	if d := at.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return done, ctx.Err()
		case <-t.C:
		}
	}
	return done, nil
}

// book returns when a send of parts may go, asked at now, and records it.
func (p *Pacer) book(now time.Time, parts int) (time.Time, *sendMark) {
	parts = max(parts, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	at := now
	if p.next.After(at) {
		at = p.next
	}
	for {
		// The parts that went in the minute before at; when they leave no
		// room, at moves to the moment the oldest of them is a minute old.
		used := 0
		var oldest time.Time
		for _, m := range p.sent {
			if m.at.After(at.Add(-time.Minute)) {
				used += m.parts
				if oldest.IsZero() || m.at.Before(oldest) {
					oldest = m.at
				}
			}
		}
		if used == 0 || used+parts <= p.per {
			break
		}
		at = oldest.Add(time.Minute)
	}
	kept := p.sent[:0]
	for _, m := range p.sent {
		if m.at.After(now.Add(-time.Minute)) {
			kept = append(kept, m)
		}
	}
	m := &sendMark{at: at, parts: parts}
	p.sent = append(kept, m)
	p.next = at.Add(time.Duration(parts) * p.gap)
	return at, m
}
