package web

import (
	"context"
	"log/slog"
)

// StreamLeases count the live views of every node of a cluster against the
// per-session, per-user and per-company caps (postgres.StreamLeases). On one
// node there are none, and the Broker's own counts are the whole truth. The
// cap on the streams of the server (StreamConfig.Max) stays per node: it
// bounds this process's connections and goroutines.
type StreamLeases interface {
	// Take leases a stream unless a cap is reached in the cluster; over
	// then names it ("session", "user" or "company"). session is a digest
	// of the session's id (streamSession), never the id, which is its
	// cookie.
	Take(ctx context.Context, company, user uint64, session string, perSession, perUser, perCompany int) (lease uint64, over string, err error)
	// Give ends a lease.
	Give(ctx context.Context, lease uint64) error
}

// ShareStreams makes the broker count its streams with the other nodes'
// through leases; call it before serving. log reports leases that could
// not be taken or given back.
func (b *Broker) ShareStreams(l StreamLeases, log *slog.Logger) {
	b.leases, b.log = l, log
}

// lease takes the cluster's lease of a stream the broker admitted, and
// returns what gives it back. A store that fails lets the stream open on
// this node's counts alone (logged): the live view is a convenience, and
// its caps protect the servers, which the per-node counts still do.
func (b *Broker) lease(ctx context.Context, s *subscriber) (giveBack func(), err error) {
	if b.leases == nil {
		return func() {}, nil
	}
	id, over, err := b.leases.Take(ctx, s.company, s.user, s.session, b.cfg.PerSession, b.cfg.PerUser, b.cfg.PerCompany)
	switch {
	case err != nil:
		b.log.Warn("console: a live view opened without its cluster lease", "err", err)
		return func() {}, nil
	case over == "company":
		return nil, errTooManyCompanyStreams
	case over != "":
		return nil, errTooManyStreams
	}
	return func() {
		// The request's context has ended by now; the lease is given back
		// regardless, or it would count until it expires.
		if err := b.leases.Give(context.WithoutCancel(ctx), id); err != nil {
			b.log.Warn("console: a live view's cluster lease was not given back; it expires by itself", "err", err)
		}
	}, nil
}
