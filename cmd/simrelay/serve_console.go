package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/web"
)

// maxConsoleStreams bounds each live-view flag: far above any real console,
// low enough that a typo cannot ask for a million held connections.
const maxConsoleStreams = 100_000

// consoleFlags bound the console's live-update streams (docs/console.md,
// docs/security.md): one company, user or session holds only its share.
func consoleFlags(fs *flag.FlagSet, cfg *web.StreamConfig) {
	fs.IntVar(&cfg.Max, "console-streams", web.DefaultMaxStreams, "console live-update streams the server holds at once (429 beyond)")
	fs.IntVar(&cfg.PerCompany, "console-streams-per-company", web.DefaultStreamsPerCompany, "console live-update streams one company holds at once")
	fs.IntVar(&cfg.PerUser, "console-streams-per-user", web.DefaultStreamsPerUser, "console live-update streams one user holds at once, over all their sessions")
	fs.IntVar(&cfg.PerSession, "console-streams-per-session", web.DefaultStreamsPerSession, "console live-update streams one signed-in browser holds at once")
	fs.DurationVar(&cfg.WriteTimeout, "console-stream-write-timeout", web.DefaultStreamWriteTimeout, "how long one write of a live-update stream may wait for a client that stopped reading before the stream ends")
}

// validateConsole checks the live-view flags; the error names the flag.
func validateConsole(cfg web.StreamConfig) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"console-streams", cfg.Max}, {"console-streams-per-company", cfg.PerCompany}, {"console-streams-per-user", cfg.PerUser}, {"console-streams-per-session", cfg.PerSession}} {
		if f.v < 1 || f.v > maxConsoleStreams {
			return fmt.Errorf("%s %d: want 1 to %d", both(f.name), f.v, maxConsoleStreams)
		}
	}
	if cfg.WriteTimeout < time.Second || cfg.WriteTimeout > 10*time.Minute {
		return fmt.Errorf("%s %s: want 1s to 10m", both("console-stream-write-timeout"), cfg.WriteTimeout)
	}
	return nil
}
