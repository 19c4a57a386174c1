package cluster

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// VersionsRemindEvery spaces the reminders that nodes of other builds still
// run beside this one: the state is the operator's to end, and a line a
// beat (every 2 s) would bury the rest of the log, while an hour keeps it
// in sight of whoever reads a day's log.
const VersionsRemindEvery = time.Hour

// NodeVersion is a live node's name and the simrelay build it runs.
type NodeVersion struct {
	Name, Version string
}

// Versions notices live nodes that run another simrelay build than this
// node, on one schema (a migration refuses to run under live nodes, so
// only builds without a migration between them meet). Nothing refuses
// them: a node restarted on a new binary keeps serving. But nodes of two
// builds sharing the work (leases, claims, link epochs, the bus's signals)
// are not tested together, so the operator is told: a WARN when it starts,
// naming the other nodes and their versions; a reminder at most every
// VersionsRemindEvery while it lasts; an INFO when every live node runs
// this node's build again (docs/cluster.md, Upgrading the nodes).
//
// It is not safe for concurrent use: the node's beat loop owns it.
type Versions struct {
	own string
	log *slog.Logger
	// since is when other builds were first seen; zero while all agree.
	since time.Time
	// reminded is when the last WARN was logged.
	reminded time.Time
}

// NewVersions watches for builds other than own (this node's version).
func NewVersions(own string, log *slog.Logger) *Versions {
	return &Versions{own: own, log: log}
}

// Observe takes the live nodes (this one among them or not) as read at
// now, and logs what changed.
func (v *Versions) Observe(now time.Time, nodes []NodeVersion) {
	var others []string
	for _, n := range nodes {
		if n.Version != v.own {
			others = append(others, fmt.Sprintf("%s (%s)", n.Name, versionName(n.Version)))
		}
	}
	switch {
	case len(others) > 0 && (v.since.IsZero() || now.Sub(v.reminded) >= VersionsRemindEvery):
		if v.since.IsZero() {
			v.since = now
		}
		v.reminded = now
		v.log.Warn("nodes of another simrelay version run on this database: nodes of two versions sharing the work are not supported; finish the upgrade by stopping the nodes of one version (docs/cluster.md, Upgrading the nodes)",
			"version", v.own, "others", strings.Join(others, ", "), "mixed_for", now.Sub(v.since).Round(time.Second))
	case len(others) == 0 && !v.since.IsZero():
		v.log.Info("every live node runs this simrelay version again", "version", v.own, "mixed_for", now.Sub(v.since).Round(time.Second))
		v.since, v.reminded = time.Time{}, time.Time{}
	}
}

// versionName is a version as the log shows it: a row written before nodes
// recorded theirs has none.
func versionName(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}
