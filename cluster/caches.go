package cluster

import (
	"context"
	"fmt"
	"time"
)

// DefaultForgetTimeout bounds how long a change waits for the other nodes
// to confirm they dropped a cached entry. Past it the change answers
// anyway (the database already holds it) and logs the nodes that did not
// confirm; their entry dies with its TTL (DefaultCacheTTL).
const DefaultForgetTimeout = 2 * time.Second

// DefaultCacheTTL is how long a node of a cluster may keep a cached entry
// without reading the database again: the bound on how stale a node that
// missed an invalidation (its bus was down a moment) can be.
const DefaultCacheTTL = 10 * time.Second

// Caches invalidates the cached entries of every node at once: a node that
// changes an entry drops its own, then Forget asks every live node to drop
// theirs and returns when they confirmed.
type Caches struct {
	bus     *Bus
	peers   *Peers
	timeout time.Duration
}

// NewCaches returns the invalidation of caches over b, waiting for the
// nodes peers knows; timeout 0 is DefaultForgetTimeout.
func NewCaches(b *Bus, peers *Peers, timeout time.Duration) *Caches {
	if timeout <= 0 {
		timeout = DefaultForgetTimeout
	}
	return &Caches{bus: b, peers: peers, timeout: timeout}
}

// topic is a cache's invalidation subject.
func cacheTopic(cache string) string { return "cache." + cache + ".forget" }

// Forget asks every other live node to drop key from cache and waits for
// their confirmations, within the timeout. Its error names how many did
// not confirm; the caller has already changed the database, so it logs
// the error rather than fail its request.
func (c *Caches) Forget(ctx context.Context, cache string, key []byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	missing, err := c.bus.Ask(ctx, cacheTopic(cache), key, c.peers.Live())
	if err != nil {
		return fmt.Errorf("cluster: forget in cache %s: not confirmed by %v: %w", cache, missing, err)
	}
	return nil
}

// OnForget calls drop with every key another node asks this one to forget
// from cache; the node confirms once drop returned.
func (c *Caches) OnForget(cache string, drop func(key []byte)) error {
	return c.bus.Answer(cacheTopic(cache), func(m Message) error {
		drop(m.Data)
		return nil
	})
}
