package cluster

import (
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Unheard notices live nodes that this node does not hear on its bus: a
// node beating in the database's registry whose census (Peers) has said
// nothing here for a grace. Either that node's bus connection is down (it
// logs so itself), or it was given another --nats-url than this node: a
// second NATS server, another account. Nothing fails then, and nothing is
// lost, but every signal between the two sides is: a send made on one
// reaches a phone linked on the other at the next link sweep (5 s) instead
// of at once, an older link is closed as late, an API key rotation does
// not wait for the other side, which accepts the old key until its cache's
// TTL, and live views miss the other side's events. Such a cluster looks
// healthy (/readyz is 200 on every node), so the operator is told: a WARN
// naming the nodes when it starts, a reminder at most every
// VersionsRemindEvery while it lasts, an INFO when every live node is heard
// again (docs/cluster.md, "When the database, the bus or a node goes
// away").
//
// The grace is at least the registry's live window: a node killed with
// kill -9 goes quiet on the bus at once but stays live in the registry for
// that window, and must not be reported as unheard.
//
// It is not safe for concurrent use: the node's beat loop owns it.
type Unheard struct {
	grace time.Duration
	log   *slog.Logger
	// missing is when each live node was first found unheard, since it
	// was last heard.
	missing map[string]time.Time
	// since is when unheard nodes were first reported; zero while none.
	since time.Time
	// reminded is when the last WARN was logged.
	reminded time.Time
	// reported are the nodes the last WARN named: one more is a new WARN
	// at once, not at the next reminder.
	reported []string
	// count is how many nodes the last Observe found unheard.
	count int
}

// NewUnheard reports live nodes unheard for longer than grace.
func NewUnheard(grace time.Duration, log *slog.Logger) *Unheard {
	return &Unheard{grace: grace, log: log, missing: map[string]time.Time{}}
}

// Observe takes, as read at now, the other nodes live in the registry
// that have a bus (this node left out) and the nodes its census hears. It
// is called only while this node's own bus is connected: without it every
// node is unheard, which the bus's own log says (see Reset).
func (u *Unheard) Observe(now time.Time, live, heard []string) {
	for name := range u.missing {
		if !slices.Contains(live, name) || slices.Contains(heard, name) {
			delete(u.missing, name)
		}
	}
	var unheard []string
	for _, name := range live {
		if slices.Contains(heard, name) {
			continue
		}
		first, ok := u.missing[name]
		if !ok {
			u.missing[name] = now
			continue
		}
		if now.Sub(first) >= u.grace {
			unheard = append(unheard, name)
		}
	}
	slices.Sort(unheard)
	u.count = len(unheard)
	switch {
	case len(unheard) > 0 && (u.since.IsZero() || now.Sub(u.reminded) >= VersionsRemindEvery || newcomer(unheard, u.reported)):
		if u.since.IsZero() {
			u.since = now
		}
		u.reminded, u.reported = now, unheard
		u.log.Warn("live nodes on this database are not heard on this node's bus: their bus connection is down, or they were given another --nats-url; signals between them and this node are lost, so sends wait for the link sweep and API key rotations for the key cache's TTL (docs/cluster.md)",
			"unheard", strings.Join(unheard, ", "), "grace", u.grace, "reported_for", now.Sub(u.since).Round(time.Second))
	case len(unheard) == 0 && !u.since.IsZero():
		u.log.Info("every live node on this database is heard on the bus (again, or the unheard ones stopped)", "reported_for", now.Sub(u.since).Round(time.Second))
		u.since, u.reminded, u.reported = time.Time{}, time.Time{}, nil
	}
}

// newcomer says whether names holds one that was not reported.
func newcomer(names, reported []string) bool {
	for _, n := range names {
		if !slices.Contains(reported, n) {
			return true
		}
	}
	return false
}

// Reset forgets what was unheard: this node's own bus is down, so it hears
// nobody, and once it is back each node's grace counts afresh.
func (u *Unheard) Reset() {
	clear(u.missing)
	u.count = 0
}

// Count is how many live nodes the last Observe found unheard for longer
// than the grace; for /metrics.
func (u *Unheard) Count() int { return u.count }
