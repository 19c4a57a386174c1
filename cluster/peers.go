package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultPeersEvery is how often a node says it is alive. A node that
// stopped saying so is no longer waited for after three periods (3 s): a
// dead node delays a change that asks every node (Caches.Forget) by at most
// that long, after which the change answers without it.
const DefaultPeersEvery = time.Second

// MaxPeers bounds the census: the other nodes one node keeps track of.
// A cluster has a few nodes; the bound keeps a flood of forged "alive"
// messages on the bus (whose names each start an entry) from growing a
// node's memory without end. Past it a name not heard before is ignored
// until stale entries (not heard for three periods) make room.
const MaxPeers = 256

// maxNodeName bounds a node's name (--node-name), said on the bus.
const maxNodeName = 255

// validNodeName is the rule of a node's name (Config.Validate): 1 to
// maxNodeName bytes without spaces, dots, * or > (it names the node's NATS
// connection). A name heard on the bus that breaks it is no node's.
func validNodeName(name string) bool {
	return name != "" && len(name) <= maxNodeName && !strings.ContainsAny(name, " \t\r\n.*>")
}

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

	reply *pacedReply // answers newcomers

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
	p.reply = newPacedReply(replyEvery, func() { b.Publish(topicAlive, []byte(b.Node())) })
	if err := b.Subscribe(topicAlive, p.heard); err != nil {
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

// heard notes a node's "alive". A name no node could have (validNodeName)
// is ignored, and so is a new name while the census is full of live ones
// (MaxPeers). A newcomer learns of this node at once, not a period later
// (pacedReply: a flood of new names is not echoed on the bus name for name).
func (p *Peers) heard(m Message) {
	name := string(m.Data)
	if !validNodeName(name) || name == p.bus.Node() {
		return
	}
	now := p.now()
	p.mu.Lock()
	_, known := p.seen[name]
	if !known && len(p.seen) >= MaxPeers {
		p.pruneLocked(now)
		if len(p.seen) >= MaxPeers {
			p.mu.Unlock()
			return
		}
	}
	p.seen[name] = now
	p.mu.Unlock()
	if !known {
		p.reply.ask()
	}
}

// pruneLocked forgets the nodes not heard within three periods.
func (p *Peers) pruneLocked(now time.Time) {
	cutoff := now.Add(-3 * p.every)
	for n, at := range p.seen {
		if !at.After(cutoff) {
			delete(p.seen, n)
		}
	}
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
			p.reply.stop()
			p.bus.Publish(topicBye, []byte(p.bus.Node()))
			return
		case <-t.C:
		}
	}
}

// Live lists the other nodes heard from within three periods, sorted.
func (p *Peers) Live() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(p.now())
	out := make([]string, 0, len(p.seen))
	for n := range p.seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
