package main

import (
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/web"
)

// The live-view bounds come from their flags or environment twins, and a
// bad one stops the server naming it.
func TestConsoleStreamFlags(t *testing.T) {
	t.Setenv("SIMRELAY_CONSOLE_STREAMS_PER_COMPANY", "7")
	c, fs := serveFlags()
	if err := parseFlags(fs, []string{"--console-streams-per-user", "5", "--console-stream-write-timeout", "3s"}, 0); err != nil {
		t.Fatal(err)
	}
	want := web.StreamConfig{Max: web.DefaultMaxStreams, PerCompany: 7, PerUser: 5, PerSession: web.DefaultStreamsPerSession, WriteTimeout: 3 * time.Second}
	if c.streams != want {
		t.Errorf("got %+v, want %+v", c.streams, want)
	}

	for _, bad := range []struct{ args []string }{
		{[]string{"--console-streams", "0"}},
		{[]string{"--console-streams-per-company", "-1"}},
		{[]string{"--console-streams-per-user", "1000000"}},
		{[]string{"--console-streams-per-session", "0"}},
		{[]string{"--console-stream-write-timeout", "10ms"}},
	} {
		code, _, errOut := runCmd(t, append([]string{"serve", "--data-dir", t.TempDir()}, bad.args...)...)
		if name := bad.args[0]; code != 2 || !strings.Contains(errOut, name+" (SIMRELAY_") {
			t.Errorf("%v: got exit %d, stderr %q; want 2 naming %s", bad.args, code, errOut, name)
		}
	}
}
