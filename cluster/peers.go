package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultPeersEvery is how often a node says it is alive. A node that
// stopped saying so is no longer waited for after three periods (3 s): a
// dead node delays a change that asks every node (Caches.Forget) by at most
// that long, after which the change answers without it.
const DefaultPeersEvery = time.Second

// Topics of the census.
const (
	topicAlive = "peers.alive"
	topicBye   = "peers.bye"
)

// Peers is this node's census of the other nodes on the bus: those heard
// from lately. It is what a question to every node (Ask) waits for; the
// database's node registry is the authority on which nodes exist, this is
// only who answers on the bus now.
type Peers struct {
	bus   *Bus
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // node -> last heard; guarded by mu
}

// NewPeers starts listening to the census; Run makes this node heard.
// every is the heartbeat period (DefaultPeersEvery when 0); now is the
// clock (time.Now when nil).
func NewPeers(b *Bus, every time.Duration, now func() time.Time) (*Peers, error) {
	if every <= 0 {
		every = DefaultPeersEvery
	}
	if now == nil {
		now = time.Now
	}
	p := &Peers{bus: b, every: every, now: now, seen: map[string]time.Time{}}
	if err := b.Subscribe(topicAlive, func(m Message) {
		p.mu.Lock()
		_, known := p.seen[string(m.Data)]
		p.seen[string(m.Data)] = p.now()
		p.mu.Unlock()
		if !known {
			// A newcomer learns of this node at once, not a period later.
			b.Publish(topicAlive, []byte(b.Node()))
		}
	}); err != nil {
		return nil, fmt.Errorf("cluster: census: %w", err)
	}
	if err := b.Subscribe(topicBye, func(m Message) {
		p.mu.Lock()
		delete(p.seen, string(m.Data))
		p.mu.Unlock()
	}); err != nil {
		return nil, fmt.Errorf("cluster: census: %w", err)
	}
	return p, nil
}

// Run says this node is alive every period until ctx ends, then says
// goodbye, so that the others stop waiting for it at once.
func (p *Peers) Run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		p.bus.Publish(topicAlive, []byte(p.bus.Node()))
		select {
		case <-ctx.Done():
			p.bus.Publish(topicBye, []byte(p.bus.Node()))
			return
		case <-t.C:
		}
	}
}

// Live lists the other nodes heard from within three periods, sorted.
func (p *Peers) Live() []string {
	cutoff := p.now().Add(-3 * p.every)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.seen))
	for n, at := range p.seen {
		if at.After(cutoff) {
			out = append(out, n)
		} else {
			delete(p.seen, n)
		}
	}
	slices.Sort(out)
	return out
}
