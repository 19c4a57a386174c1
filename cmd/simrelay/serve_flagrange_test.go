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

// --device-offline-grace of 0 or less was taken for the default (2m) while
// the console's settings page showed the value given: it is refused at
// start, naming the flag, as every other bad value is.
func TestDeviceOfflineGraceRange(t *testing.T) {
	const refused = "--device-offline-grace (SIMRELAY_DEVICE_OFFLINE_GRACE) "
	testFlagRange(t, "device-offline-grace", "SIMRELAY_DEVICE_OFFLINE_GRACE", []rangeCase{
		{"", "", ""}, // the default, 2m
		{"1s", "", ""},
		{"", "5m", ""},
		{"0s", "", refused + "0s: must be positive"},
		{"-5s", "", refused + "-5s: must be positive"},
		{"", "-1m", refused + "-1m0s: must be positive"},
	}, func(t *testing.T, cfg *serveConfig, c rangeCase) {
		want := map[string]string{"": "2m0s", "1s": "1s", "5m": "5m0s"}[c.flag+c.env]
		if got := cfg.offlineGrace.String(); got != want {
			t.Errorf("grace %s, want %s", got, want)
		}
	})
}

// Two caps of a channel out of range: serve names the first in the order
// of docs/pacing.md's table, whichever run (the checks looped over a map,
// so the flag named changed from one start to the next).
func TestPacingNamesTheFirstBadCap(t *testing.T) {
	t.Parallel()
	for range 8 {
		cfg, fs := serveFlags()
		if err := parseFlags(fs, []string{"--data-dir", t.TempDir(), "--whatsapp-per-day", "0", "--whatsapp-per-hour", "0", "--whatsapp-per-minute", "0"}, 0); err != nil {
			t.Fatal(err)
		}
		const want = "--whatsapp-per-minute (SIMRELAY_WHATSAPP_PER_MINUTE) 0: want 1 to 65535"
		if err := cfg.validate(); err == nil || err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
	}
}

// --hello-timeout is PROTOCOL.md's 10 s by default and takes 1s to 10s: a
// phone is promised no more than 10 s, and a shorter one is for tests.
func TestHelloTimeoutRange(t *testing.T) {
	const refused = "--hello-timeout (SIMRELAY_HELLO_TIMEOUT) "
	testFlagRange(t, "hello-timeout", "SIMRELAY_HELLO_TIMEOUT", []rangeCase{
		{"", "", ""}, // the default, 10s
		{"1s", "", ""},
		{"", "2s", ""},
		{"10s", "", ""},
		{"999ms", "", refused + "999ms: want 1s to 10s"},
		{"0s", "", refused + "0s: want 1s to 10s"},
		{"", "11s", refused + "11s: want 1s to 10s"},
	}, func(t *testing.T, cfg *serveConfig, c rangeCase) {
		want := map[string]string{"": "10s", "1s": "1s", "2s": "2s", "10s": "10s"}[c.flag+c.env]
		if got := cfg.helloTimeout.String(); got != want {
			t.Errorf("hello timeout %s, want %s", got, want)
		}
	})
}
