package main

import "testing"

// --link-sweep is the bound on how late a signal the bus lost is covered
// (contract section 12: "at most a few seconds"), so a value outside
// 100 ms to 10 s is refused at start, naming the flag and the range,
// whether it came as the flag or as its environment twin.
func TestLinkSweepRange(t *testing.T) {
	const refused = "--link-sweep (SIMRELAY_LINK_SWEEP) "
	const rng = ": want 100ms to 10s"
	testFlagRange(t, "link-sweep", "SIMRELAY_LINK_SWEEP", []rangeCase{
		{"", "", ""}, // the default, 5 s
		{"100ms", "", ""},
		{"300ms", "", ""},
		{"5s", "", ""},
		{"10s", "", ""},
		{"", "2s", ""},
		{"99ms", "", refused + "99ms" + rng},
		{"0s", "", refused + "0s" + rng},
		{"-1s", "", refused + "-1s" + rng},
		{"10.001s", "", refused + "10.001s" + rng},
		{"1m", "", refused + "1m0s" + rng},
		{"1h", "", refused + "1h0m0s" + rng},
		{"", "1h", refused + "1h0m0s" + rng},
	}, nil)
}
