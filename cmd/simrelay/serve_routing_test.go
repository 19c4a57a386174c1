package main

import (
	"strings"
	"testing"
)

// --link-sweep is the bound on how late a signal the bus lost is covered
// (contract section 12: "at most a few seconds"), so a value outside
// 100 ms to 10 s is refused at start, naming the flag and the range,
// whether it came as the flag or as its environment twin.
func TestLinkSweepRange(t *testing.T) {
	const refused = "--link-sweep (SIMRELAY_LINK_SWEEP) "
	const rng = ": want 100ms to 10s"
	cases := []struct {
		flag, env string
		want      string // "" accepted, else the error's text
	}{
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
	}
	for _, c := range cases {
		t.Run(c.flag+"/"+c.env, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("SIMRELAY_LINK_SWEEP", c.env)
			}
			cfg, fs := serveFlags()
			args := []string{"--data-dir", t.TempDir()}
			if c.flag != "" {
				args = append(args, "--link-sweep", c.flag)
			}
			if err := parseFlags(fs, args, 0); err != nil {
				t.Fatal(err)
			}
			err := cfg.validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
				t.Fatalf("got %v, want an error starting %q", err, c.want)
			}
		})
	}
}
