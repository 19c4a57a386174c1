// Command simrelay is the whole product in one binary: `simrelay serve` runs
// the REST API, the phone hub and the workers over one store, embedded
// (bbolt in --data-dir) or in PostgreSQL (--database-url); `simrelay admin`
// works on the store directly (an embedded one with its server stopped).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/simrelay/simrelay/internal/cliflag"
	"github.com/simrelay/simrelay/internal/stopsig"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; it
// falls back to the VCS revision Go records in the binary.
var version = ""

func main() {
	ctx := context.Background()
	if len(os.Args) > 1 && stopsInOrder[os.Args[1]] {
		ctx = stopOnSignal(ctx)
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// stopOnSignal is ctx, ended at the first SIGINT, SIGTERM or SIGHUP (a
// hang-up only when the process was not started ignoring it, as nohup starts
// it: stopsig.Signals): the command's to stop on. A second ends the process at once, as a kill does, when that
// stop is held up (a request that does not end, a prune running its
// course): the signals' default action is back before ctx ends, so that
// one sent after the command says it stops is never caught, and one that
// came in between is sent again.
func stopOnSignal(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	stops := stopsig.Signals()
	heard := make(chan os.Signal, 2)
	signal.Notify(heard, stops...)
	go func() {
		<-heard
		signal.Reset(stops...)
		cancel()
		select {
		case again := <-heard:
			if p, err := os.FindProcess(os.Getpid()); err != nil || p.Signal(again) != nil {
				os.Exit(1)
			}
		default:
		}
	}()
	return ctx
}

// stopsInOrder are the commands that hear SIGINT, SIGTERM and SIGHUP (the
// hang-up of the terminal or ssh session they were started from) and stop in
// their own order (serve finishes its requests, the virtual phone closes
// its link, bench stops its servers), at the first of the three signals. The others, admin's, are ended by
// either signal where they are, as by a kill, which each is built to
// survive: a caught signal they never looked at left a restore or a
// copy-store that the operator stopped running on to its end.
var stopsInOrder = map[string]bool{"serve": true, "phone": true, "bench": true}

const usage = `simrelay turns your own phones into a messaging gateway: SMS, and WhatsApp and iMessage through agents.

Usage:
  simrelay serve [flags]            run the server (simrelay serve -h lists every flag)
  simrelay admin create-company     create a company with a verified admin and print its API key
  simrelay admin mail               list the mail outbox
  simrelay admin backup FILE        write a consistent copy of the embedded store to FILE
  simrelay admin restore FILE       put a backup in place as the embedded store, the server stopped
  simrelay admin check              walk every page of the embedded store, the server stopped
  simrelay admin set-plan           put a company on a plan, without a payment provider
  simrelay admin delete-device      delete a device by its fingerprint as stored (one no API path can name)
  simrelay admin delete-company     remove a company with every record of it
  simrelay admin copy-store         copy the store into an empty PostgreSQL database
  simrelay admin rotate-keys        replace the server's own keys, every server stopped
  simrelay phone [flags]            run a virtual phone (simrelay phone -h)
  simrelay bench [flags]            measure a server on loopback (simrelay bench -h)
  simrelay version                  print the version

simrelay admin -h lists the admin commands' flags; simrelay help COMMAND
is COMMAND -h. Every flag has an environment twin: --data-dir is
SIMRELAY_DATA_DIR.
`

// run is main without the process: tests call it with their own context and writers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "admin":
		return admin(ctx, args[1:], stdout, stderr)
	case "phone":
		return phoneCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return cliflag.VersionCommand("simrelay", buildVersion(), args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		return cliflag.Help(args, usage, stdout, func(args []string) int { return run(ctx, args, stdout, stderr) })
	}
	fmt.Fprintf(stderr, "simrelay: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// buildVersion is this build's version (cliflag.Version).
func buildVersion() string { return cliflag.Version(version) }
