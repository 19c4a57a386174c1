package postgres

import (
	"context"
	"fmt"
	"time"
)

// Leases of the console's live views (table stream_leases, migration 0012).
const (
	// StreamLeaseTTL is how long a lease lives unless its node renews it:
	// the bound on how long the streams of a node that died still count
	// against their user's and company's caps.
	StreamLeaseTTL = time.Minute
	// StreamLeaseRenew is how often a node renews its leases: a third of
	// the TTL, so that two renewals can be lost before a live stream's lease
	// dies.
	StreamLeaseRenew = StreamLeaseTTL / 3
)

// StreamLeases count the console's live views of every node of a cluster
// against the per-session, per-user and per-company caps: each open stream
// holds a lease in the database, which its node renews (Renew) and deletes
// when the stream ends (Give), and which dies StreamLeaseTTL after its node
// stopped renewing it.
type StreamLeases struct {
	s    *Store
	node string
}

// StreamLeases returns the leases of the node named node (unique in the
// cluster). The leases a previous run of the node left are deleted: their
// streams ended with it.
func (s *Store) StreamLeases(node string) (*StreamLeases, error) {
	if node == "" {
		return nil, fmt.Errorf("store: stream leases: the node has no name")
	}
	ctx, cancel := context.WithTimeout(s.ctx, windowTimeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "DELETE FROM stream_leases WHERE node = $1", node); err != nil {
		return nil, fmt.Errorf("store: stream leases of node %s: %w", node, s.closed(err))
	}
	return &StreamLeases{s: s, node: node}, nil
}

// Take leases one stream of the session, user and company, unless the
// leases alive in the cluster already reach a cap: over then names it
// ("session", "user" or "company") and no lease is taken. The company's row
// lock serialises the takes of one company, so two nodes never both take
// the last place.
func (l *StreamLeases) Take(_ context.Context, company, user uint64, session string, perSession, perUser, perCompany int) (lease uint64, over string, err error) {
	err = l.s.write("lease a stream", func(t *txn) error {
		lease, over = 0, ""
		var locked int64
		if err := t.row("SELECT id FROM companies WHERE id = $1 FOR UPDATE", id(company)).Scan(&locked); err != nil {
			return err
		}
		var inSession, ofUser, ofCompany int
		if err := t.row(`SELECT count(*) FILTER (WHERE session = $2), count(*) FILTER (WHERE user_id = $3), count(*)
			FROM stream_leases WHERE company_id = $1 AND expires_at > now()`, id(company), session, id(user)).Scan(&inSession, &ofUser, &ofCompany); err != nil {
			return err
		}
		switch {
		case inSession >= perSession:
			over = "session"
		case ofUser >= perUser:
			over = "user"
		case ofCompany >= perCompany:
			over = "company"
		}
		if over != "" {
			return nil
		}
		var leased int64
		if err := t.row(`INSERT INTO stream_leases (node, company_id, user_id, session, expires_at)
			VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING id`,
			l.node, id(company), id(user), session, StreamLeaseTTL.Seconds()).Scan(&leased); err != nil {
			return err
		}
		lease = uint64(leased)
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	return lease, over, nil
}

// Give ends a lease: its stream ended.
func (l *StreamLeases) Give(_ context.Context, lease uint64) error {
	ctx, cancel := context.WithTimeout(l.s.ctx, windowTimeout)
	defer cancel()
	if _, err := l.s.pool.Exec(ctx, "DELETE FROM stream_leases WHERE id = $1", id(lease)); err != nil {
		return fmt.Errorf("store: end stream lease %d: %w", lease, l.s.closed(err))
	}
	return nil
}

// Renew extends every lease of this node by StreamLeaseTTL, and deletes the
// leases of any node that died (expired): one pass, every
// StreamLeaseRenew, by every node.
func (l *StreamLeases) Renew() error {
	ctx, cancel := context.WithTimeout(l.s.ctx, windowTimeout)
	defer cancel()
	if _, err := l.s.pool.Exec(ctx, "UPDATE stream_leases SET expires_at = now() + make_interval(secs => $2) WHERE node = $1",
		l.node, StreamLeaseTTL.Seconds()); err != nil {
		return fmt.Errorf("store: renew the stream leases of node %s: %w", l.node, l.s.closed(err))
	}
	if _, err := l.s.pool.Exec(ctx, "DELETE FROM stream_leases WHERE expires_at <= now()"); err != nil {
		return fmt.Errorf("store: delete expired stream leases: %w", l.s.closed(err))
	}
	return nil
}
