package main

import (
	"strings"
	"testing"
)

// rangeCase is one value of a bounded flag: given as the flag, or as its
// environment twin, or neither (the default); want is "" when serve takes
// it, else the start of the error that refuses it.
type rangeCase struct {
	flag, env string
	want      string
}

// testFlagRange parses each case as serve would and checks validate's
// verdict; then, when given, runs check on the configuration taken.
func testFlagRange(t *testing.T, name, envName string, cases []rangeCase, check func(*testing.T, *serveConfig, rangeCase)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.flag+"/"+c.env, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(envName, c.env)
			}
			cfg, fs := serveFlags()
			args := []string{"--data-dir", t.TempDir()}
			if c.flag != "" {
				args = append(args, "--"+name, c.flag)
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
			if check != nil && err == nil {
				check(t, cfg, c)
			}
		})
	}
}
