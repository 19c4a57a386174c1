package main

import "testing"

// --node-live-window is refused outside 2 s to 10 s at start, naming the
// flag and the range, whether it came as the flag or as its environment
// twin; the default is the 10 s every cluster ran with before the flag.
func TestNodeLiveWindowRange(t *testing.T) {
	const refused = "--node-live-window (SIMRELAY_NODE_LIVE_WINDOW) "
	const rng = ": want 2s to 10s"
	testFlagRange(t, "node-live-window", "SIMRELAY_NODE_LIVE_WINDOW", []rangeCase{
		{"", "", ""},
		{"2s", "", ""},
		{"3s", "", ""},
		{"10s", "", ""},
		{"", "5s", ""},
		{"1.999s", "", refused + "1.999s" + rng},
		{"0s", "", refused + "0s" + rng},
		{"-1s", "", refused + "-1s" + rng},
		{"10.001s", "", refused + "10.001s" + rng},
		{"", "1m", refused + "1m0s" + rng},
	}, func(t *testing.T, cfg *serveConfig, c rangeCase) {
		if c.flag != "" || c.env != "" {
			return
		}
		if live, beat := cfg.cluster.timing(); live != defaultNodeLiveWithin || beat != defaultNodeLiveWithin/5 {
			t.Fatalf("default window %s, beat %s; want 10s and 2s", live, beat)
		}
	})
}
