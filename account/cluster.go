package account

import (
	"context"
	"time"
)

// keysCache names the API key cache on the bus.
const keysCache = "api-keys"

// Peers are the other nodes of a cluster, as the account service needs
// them (cluster.Caches).
type Peers interface {
	// Forget asks every other live node to drop key from its cache named
	// cache, and returns once they confirmed or a short timeout passed.
	Forget(ctx context.Context, cache string, key []byte) error
	// OnForget calls drop with each key another node asks this one to drop.
	OnForget(cache string, drop func(key []byte)) error
}

// SetPeers makes the service one node of a cluster: a key rotated here is
// refused on every other live node before RotateAPIKey returns, and a
// cached key is read again from the store after ttl, which bounds what a
// node that missed a rotation (its bus was down) keeps accepting. Call it
// before serving; without it (one node) keys are cached until rotated.
func (s *Service) SetPeers(peers Peers, ttl time.Duration) error {
	if err := peers.OnForget(keysCache, s.forgetKey); err != nil {
		return err
	}
	s.peers, s.keyTTL = peers, ttl
	return nil
}

// SetKeyTTL has a cached API key read again from the store after ttl, on a
// server that is not a node of a cluster but whose store other processes
// write: a lone server on PostgreSQL, beside which the admin commands run
// (simrelay admin delete-company takes a company's key away). SetPeers sets
// it for a cluster's node. Call it before serving; 0 caches keys until
// rotated here.
func (s *Service) SetKeyTTL(ttl time.Duration) { s.keyTTL = ttl }

// forgetKey drops an API key hash from this node's cache. keysGen moves
// first, so that a lookup reading the store meanwhile does not cache the
// key again.
func (s *Service) forgetKey(hash []byte) {
	s.keysGen.Add(1)
	s.keys.Delete(string(hash))
}

// forgetKeyElsewhere has every other node drop the hash. The rotation is
// committed already: a node that does not confirm is logged, and its
// cached key dies with keyTTL.
func (s *Service) forgetKeyElsewhere(ctx context.Context, hash []byte) {
	if s.peers == nil || len(hash) == 0 {
		return
	}
	if err := s.peers.Forget(context.WithoutCancel(ctx), keysCache, hash); err != nil {
		s.log.Warn("api key rotated, but not every node confirmed it dropped the old one; theirs expires within the cache TTL",
			"ttl", s.keyTTL, "err", err)
	}
}
