package main

import (
	"flag"
	"fmt"
	"time"
)

// The node registry's timing (docs/cluster.md, "What each node needs").
const (
	// defaultNodeLiveWithin is how recent a node's beat must be for it to
	// count as live: five beats, so a node slowed by a busy database for a
	// few seconds is not taken for dead.
	defaultNodeLiveWithin = 10 * time.Second
	// minNodeLiveWithin keeps a beat (a fifth of the window) at 400 ms or
	// more: below it every node writes its row several times a second, and
	// a stall of a second breaks the node's beats (cluster.Beats).
	minNodeLiveWithin = 2 * time.Second
	// beatsPerWindow is how many beats a node writes per live window.
	beatsPerWindow = 5
)

// liveWindowFlag adds --node-live-window. Every node of a cluster must be
// given the same: each judges the others by its own (the shared settings,
// serve_settings.go, name a node that differs).
func liveWindowFlag(fs *flag.FlagSet, live *time.Duration) {
	fs.DurationVar(live, "node-live-window", defaultNodeLiveWithin, "in a cluster, how long a node may be silent in the database's registry before the others take it for dead (it beats five times a window); the same on every node, 2s to 10s")
}

// validateLiveWindow refuses a window outside its range. Longer than the
// default is refused: docs/cluster.md's bounds (a dead node's phones and
// leases taken over within about 10 s) are the default's.
func validateLiveWindow(live time.Duration) error {
	if live < minNodeLiveWithin || live > defaultNodeLiveWithin {
		return fmt.Errorf("%s %s: want %s to %s (how long a silent node counts as live)", both("node-live-window"), live, minNodeLiveWithin, defaultNodeLiveWithin)
	}
	return nil
}

// timing is the node's live window and the period of its beats; a config
// built without flags has the defaults.
func (c clusterConfig) timing() (live, beat time.Duration) {
	live = c.liveWithin
	if live == 0 {
		live = defaultNodeLiveWithin
	}
	return live, live / beatsPerWindow
}
