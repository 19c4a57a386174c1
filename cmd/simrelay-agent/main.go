// Command simrelay-agent runs on the device that owns the SIM (an Android
// phone under Termux, a Raspberry Pi with a USB modem) and connects it to a
// simrelay server as a phone: `simrelay-agent pair` registers it with a
// pairing code, `simrelay-agent run` holds the link and sends and receives
// through the device's tools. It is a separate binary so that the server
// stays as lean as it is; docs/agents.md is its manual.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/simrelay/simrelay/internal/cliflag"
	"github.com/simrelay/simrelay/internal/stopsig"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func main() {
	os.Exit(run(interrupted(), os.Args[1:], os.Stdout, os.Stderr))
}

// interrupted is a context that ends at the first SIGINT, SIGTERM or
// SIGHUP, which lets a send already inside the device's tool finish. A
// hang-up (the terminal, Termux session or ssh session the agent was
// started from closing) stops it as SIGTERM does; it ended the agent at
// once, the send's outcome unknown. An agent started with hang-ups ignored
// (nohup) keeps ignoring them: Go would otherwise catch them again. The
// signals take their default action again before it ends: a second one
// ends the agent at once, as its user expects of a second Ctrl-C (the send
// is then settled by the restart rule, docs/agents.md).
func interrupted() context.Context {
	stops := stopsig.Signals()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stops...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-sigs
		signal.Reset(stops...)
		cancel()
	}()
	return ctx
}

const usage = `simrelay-agent connects this device's SIM to a simrelay server.

Usage:
  simrelay-agent pair --server URL --code CODE   register with a pairing code (or --uri simrelay://pair?...)
  simrelay-agent run [--transport termux|modem]  hold the link: send and receive SMS
  simrelay-agent whatsapp link                   link a WhatsApp account (scan the QR code it prints)
  simrelay-agent run --transport whatsapp        send and receive on the linked WhatsApp account
  simrelay-agent run --transport imessage        send and receive iMessage (on a Mac)
  simrelay-agent version                         print the version

simrelay-agent COMMAND -h (or help COMMAND) lists a command's flags. Every
flag has an environment twin: --config is SIMRELAY_AGENT_CONFIG.
docs/agents.md explains the set-up of each: a phone (Termux), a Raspberry Pi
(modem), WhatsApp and a Mac (iMessage).
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "pair":
		return pairCmd(ctx, args[1:], stdout, stderr)
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "whatsapp":
		return whatsappCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return cliflag.VersionCommand("simrelay-agent", buildVersion(), args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		return cliflag.Help(args, usage, stdout, func(args []string) int { return run(ctx, args, stdout, stderr) })
	}
	fmt.Fprintf(stderr, "simrelay-agent: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// buildVersion is this build's version (cliflag.Version).
func buildVersion() string { return cliflag.Version(version) }

// defaultConfigPath is ~/.config/simrelay-agent/agent.json (in Termux, under
// its private home directory).
func defaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = "."
	}
	return filepath.Join(dir, "simrelay-agent", "agent.json")
}

// envTwins is the prefix of the agent's environment twins: --config is SIMRELAY_AGENT_CONFIG.
const envTwins = cliflag.Env("SIMRELAY_AGENT_")

// parse reads a command's flags, written as simrelay's are (--flag), and
// fills every flag not given from its environment twin. The command takes
// no positional arguments: a stray word is refused by name rather than
// ending the flags, so none after it is silently dropped.
func parse(fs *flag.FlagSet, args []string) error {
	fs.Usage = envTwins.Usage(fs, "Usage: simrelay-agent "+fs.Name()+" [flags]\n\n"+
		"Flags, each with its environment twin; docs/agents.md has the set-up:\n")
	return envTwins.Parse(fs, args, 0)
}

// parseExit prints why a command's flags did not parse and is its exit
// status: 0 when help was asked for (and printed), 2 otherwise.
func parseExit(stderr io.Writer, fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "simrelay-agent %s: %v\n", fs.Name(), err)
	return 2
}
