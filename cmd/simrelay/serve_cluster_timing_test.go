package main

import (
	"strings"
	"testing"
)

// --node-live-window is refused outside 2 s to 10 s at start, naming the
// flag and the range, whether it came as the flag or as its environment
// twin; the default is the 10 s every cluster ran with before the flag.
func TestNodeLiveWindowRange(t *testing.T) {
	const refused = "--node-live-window (SIMRELAY_NODE_LIVE_WINDOW) "
	const rng = ": want 2s to 10s"
	cases := []struct {
		flag, env string
		want      string // "" accepted, else the error's text
	}{
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
	}
	for _, c := range cases {
		t.Run(c.flag+"/"+c.env, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("SIMRELAY_NODE_LIVE_WINDOW", c.env)
			}
			cfg, fs := serveFlags()
			args := []string{"--data-dir", t.TempDir()}
			if c.flag != "" {
				args = append(args, "--node-live-window", c.flag)
			}
			if err := parseFlags(fs, args, 0); err != nil {
				t.Fatal(err)
			}
			if c.flag == "" && c.env == "" {
				if live, beat := cfg.cluster.timing(); live != defaultNodeLiveWithin || beat != defaultNodeLiveWithin/5 {
					t.Fatalf("default window %s, beat %s; want 10s and 2s", live, beat)
				}
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
