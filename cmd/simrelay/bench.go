package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/simrelay/simrelay/bench"
	"github.com/simrelay/simrelay/internal/cliflag"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := bench.Defaults()
	var jsonPath string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Phones, "phones", cfg.Phones, "idle phones to connect")
	fs.DurationVar(&cfg.SendFor, "send-for", cfg.SendFor, "length of the throughput phase (0: skip it)")
	fs.IntVar(&cfg.Senders, "senders", cfg.Senders, "concurrent REST senders in the throughput phase")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "sends per second of the latency phase")
	fs.DurationVar(&cfg.RateFor, "rate-for", cfg.RateFor, "length of the latency phase (0: skip it)")
	fs.IntVar(&cfg.InboundRate, "inbound-rate", cfg.InboundRate, "inbound messages per second of the webhook phase")
	fs.DurationVar(&cfg.InboundFor, "inbound-for", cfg.InboundFor, "length of the webhook phase (0: skip it)")
	fs.IntVar(&cfg.SeedMessages, "messages", cfg.SeedMessages, "messages stored before the list phase")
	fs.IntVar(&cfg.Queries, "queries", cfg.Queries, "requests per list measurement")
	fs.IntVar(&cfg.DrainJobs, "drain-jobs", cfg.DrainJobs, "backlog of the one phone of the drain phase (0: skip it)")
	fs.DurationVar(&cfg.PoolFor, "pool-for", cfg.PoolFor, "length of each pool phase, least_loaded and sticky (0: skip them)")
	fs.DurationVar(&cfg.RestartAfter, "restart-after", cfg.RestartAfter, "the restart phase: sends stream this long (and on until one is answered), then the server is killed (SIGKILL) and started again on its store (0: skip it)")
	fs.IntVar(&cfg.BulkRequests, "bulk-requests", cfg.BulkRequests, "bulk sends of 1,000 messages in the bulk phase (0: skip it)")
	var pprofListen string
	var slowSync time.Duration
	fs.DurationVar(&slowSync, "slow-sync", 0, "make the server's disk look slower: each store commit holds its writer this much longer after the fsync (the server's --store-sync-delay)")
	fs.StringVar(&pprofListen, "pprof-listen", "", "let the server serve pprof profiles on this loopback host:port, to profile it during the run")
	databaseURL := new(cliflag.DatabaseURL)
	fs.Var(databaseURL, cliflag.DatabaseURLFlag, "run the server on this PostgreSQL database, postgres://USER:PASSWORD@HOST:5432/DB, which must hold no company (the bench fills it and leaves it filled); empty: a temporary embedded store")
	fs.StringVar(&jsonPath, "json", "simrelay-bench.json", "where to write the figures as JSON (empty: nowhere)")
	cl := addBenchNodesFlags(fs)
	fs.Usage = flagUsage(fs, "Usage: simrelay bench [flags]\n\nStarts a server on loopback with a temporary store (or, with --database-url, an empty PostgreSQL database of its own), connects virtual phones and measures it.\nExits 1 when a phase fails (a request the server answers other than 200 fails its phase), and when the restart phase finds a send answered before the kill that never reached a phone (the figures are printed and written first).\nCtrl-C (SIGINT, SIGTERM, SIGHUP unless started under nohup) stops the run: the figures of the phases before the one it cut are printed and written, with \"interrupted\" naming that phase, and it exits 1.\nThe servers it starts take no SIMRELAY_* setting from its environment but SIMRELAY_NODE_LIVE_WINDOW. A rate times its length is at most 1,000,000 messages.\nWith --nodes N (2 or more), --database-url and --nats-url it starts N nodes on that database and bus instead and measures the cluster (docs/cluster.md).\n\nFlags, each with its environment twin:\n")
	if err := parseFlags(fs, args, 0); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 2
	}
	if cl.nodes < 1 {
		fmt.Fprintf(stderr, "simrelay bench: %s %d: want 1 (one server) or more\n", both("nodes"), cl.nodes)
		return 2
	}
	if err := benchSizesValid(cfg, cl.failover, slowSync); err != nil {
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 2
	}
	if cl.nodes > 1 {
		return benchCluster(ctx, fs, cl, cfg, databaseURL.URL(), jsonPath, stdout, stderr)
	}
	if cl.natsURL != "" || cl.failover != benchNodes0.failover {
		fmt.Fprintf(stderr, "simrelay bench: %s and %s measure a cluster: give %s too\n", both("nats-url"), both("failover-phones"), both("nodes"))
		return 2
	}
	if databaseURL.URL() != "" && slowSync > 0 {
		fmt.Fprintf(stderr, "simrelay bench: %s slows the embedded store's writer: it has no meaning with %s\n", both("slow-sync"), both(cliflag.DatabaseURLFlag))
		return 2
	}
	cfg.DatabaseURL = databaseURL.URL()
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 1
	}
	cfg.Binary, cfg.Log = bin, stderr
	if pprofListen != "" {
		cfg.ServerArgs = append(cfg.ServerArgs, "--pprof-listen", pprofListen)
	}
	if slowSync > 0 {
		cfg.ServerArgs = append(cfg.ServerArgs, "--store-sync-delay", slowSync.String())
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 1
	}
	return finishBench(rep, jsonPath, stdout, stderr)
}

// finishBench prints a run's figures, writes them to jsonPath and answers
// the command's exit code: 1 when they could not be written, and 1 when
// the run found data lost, sends of the restart phase answered 2xx before
// the kill that never reached a phone after it. A bench that finds one is
// a failed check (a send answered 2xx survives kill -9), said on a line of
// its own after the figures.
func finishBench(rep bench.Report, jsonPath string, stdout, stderr io.Writer) int {
	printReport(stdout, rep)
	code := writeReport(rep, jsonPath, stdout, stderr)
	if code == 0 && rep.Interrupted != "" {
		return interrupted(stderr, rep.Interrupted)
	}
	if rep.RestartLost > 0 {
		fmt.Fprintf(stderr, "simrelay bench: lost data: %d of the %d sends answered 2xx before the kill -9 never reached a phone after the restart (want 0: a send answered 2xx survives a crash)\n", rep.RestartLost, rep.RestartAnswered)
		return 1
	}
	return code
}

// interrupted says that a run was cut by a signal, and answers the
// command's exit code: 1, the run is not whole.
func interrupted(stderr io.Writer, phase string) int {
	fmt.Fprintf(stderr, "simrelay bench: stopped by a signal during the %s phase: the figures printed are those of the phases before it\n", phase)
	return 1
}

// maxSamples bounds the messages (rate x duration) of a timed phase: each
// is queued before the phase starts, timed and kept for its percentiles.
// 2,000,000,000 a second for 10 s asked for a queue of 20 billion sends:
// the bench panicked after the earlier phases and left its server running.
const maxSamples = 1_000_000

// benchSizesValid refuses a size or a length the bench cannot run with,
// naming the flag, before it starts anything: a negative one (a count
// below zero panicked with the server started), a rate of 0 (its pace
// divided by it), or no phone, sender or query to measure with.
func benchSizesValid(cfg bench.Config, failover int, slowSync time.Duration) error {
	for _, c := range []struct {
		name     string
		v, least int
	}{
		{"phones", cfg.Phones, 1}, {"senders", cfg.Senders, 1}, {"rate", cfg.Rate, 1}, {"inbound-rate", cfg.InboundRate, 1},
		{"queries", cfg.Queries, 1}, {"messages", cfg.SeedMessages, 0}, {"drain-jobs", cfg.DrainJobs, 0},
		{"bulk-requests", cfg.BulkRequests, 0}, {"failover-phones", failover, 0},
	} {
		if c.v < c.least {
			return fmt.Errorf("%s %d: want %d or more", both(c.name), c.v, c.least)
		}
	}
	for _, r := range []struct {
		rate, length string
		n            int
		d            time.Duration
	}{{"rate", "rate-for", cfg.Rate, cfg.RateFor}, {"inbound-rate", "inbound-for", cfg.InboundRate, cfg.InboundFor}} {
		if sends := float64(r.n) * r.d.Seconds(); sends > maxSamples {
			return fmt.Errorf("%s %d for %s %s is %.0f messages: want at most %d (each is timed and kept): lower either", both(r.rate), r.n, both(r.length), r.d, sends, maxSamples)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"send-for", cfg.SendFor}, {"rate-for", cfg.RateFor}, {"inbound-for", cfg.InboundFor}, {"pool-for", cfg.PoolFor},
		{"restart-after", cfg.RestartAfter}, {"slow-sync", slowSync},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s %s: want 0 or more", both(d.name), d.v)
		}
	}
	return nil
}

// writeReport writes a bench's report as JSON to path (none when empty)
// and answers the command's exit code.
func writeReport(rep any, path string, stdout, stderr io.Writer) int {
	if path == "" {
		return 0
	}
	raw, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", path)
	return 0
}

func printReport(w io.Writer, r bench.Report) {
	fmt.Fprintf(w, "simrelay bench %s on %s, store %s\n\n", buildVersion(), r.Machine, r.Store)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tresult\ttarget")
	// A run cut by a signal prints the phases it took to their end only:
	// the others' zeros are no figures.
	if r.Measured(bench.PhaseIdle) {
		if r.RSSPerPhoneKB >= 0 && r.AnonPerPhoneKB >= 0 {
			fmt.Fprintf(tw, "RSS per idle phone (%d phones)\t%.1f KB\t<= 10 KB\n", r.Phones, r.RSSPerPhoneKB)
			fmt.Fprintf(tw, "  of which anonymous (heap, stacks; not store pages)\t%.1f KB\t\n", r.AnonPerPhoneKB)
		} else {
			// The server's RSS fell while the phones linked: what a
			// seeding left was returned to the system, more than so few
			// phones took (the JSON keeps the raw difference).
			fmt.Fprintf(tw, "RSS per idle phone (%d phones)\tnot measured: the RSS fell (use thousands of phones)\t<= 10 KB\n", r.Phones)
		}
		// So do the Go heap and stack, at a few phones.
		if r.HeapPerPhoneKB >= 0 && r.LiveHeapPerPhoneKB >= 0 {
			fmt.Fprintf(tw, "Go heap in use / live per idle phone (after a GC)\t%.1f / %.1f KB\t\n", r.HeapPerPhoneKB, r.LiveHeapPerPhoneKB)
		} else {
			fmt.Fprintf(tw, "Go heap in use / live per idle phone (after a GC)\tnot measured: it fell (use thousands of phones)\t\n")
		}
		if r.StackPerPhoneKB >= 0 {
			fmt.Fprintf(tw, "Go stack per idle phone\t%.1f KB\t\n", r.StackPerPhoneKB)
		} else {
			fmt.Fprintf(tw, "Go stack per idle phone\tnot measured: it fell (use thousands of phones)\t\n")
		}
		fmt.Fprintf(tw, "server goroutines per idle phone\t%.2f\t\n", r.GoroutinesPerPhone)
		fmt.Fprintf(tw, "%d phones online from none (a hello each)\t%.1f s, %.0f /s\t\n", r.Phones, r.ConnectSeconds, r.ConnectPerSecond)
	}
	if r.Measured(bench.PhaseSends) {
		fmt.Fprintf(tw, "durable sends, answered and acked by the phone\t%.0f /s\t>= 10000 /s\n", r.SendsPerSecond)
		fmt.Fprintf(tw, "  answered, not on the phone at the phase's end / last on it after\t%d / %.0f ms\t0 / < 1000 ms\n", r.SendsBehind, r.SendsCatchUpMs)
	}
	if r.DrainJobs > 0 {
		fmt.Fprintf(tw, "one phone draining %d jobs (ack, sent, delivered)\t%.0f jobs/s\t>= 1000 /s\n", r.DrainJobs, r.DrainPerSecond)
		if r.Measured(bench.PhaseSends) {
			fmt.Fprintf(tw, "  as a ratio of the durable send rate\t%.2f\t>= 0.50\n", r.DrainRatio)
		}
	}
	if r.PoolLeastLoadedPerSec > 0 {
		fmt.Fprintf(tw, "durable sends through a pool of %d phones: least_loaded / sticky\t%.0f / %.0f /s\t\n", r.PoolMembers, r.PoolLeastLoadedPerSec, r.PoolStickyPerSec)
	}
	if r.RestartAnswered > 0 {
		fmt.Fprintf(tw, "kill -9 and restart: listening / phones linked p50 / all\t%.0f / %.0f / %.0f ms\t\n", r.RestartListeningMs, r.RestartLinkedP50Ms, r.RestartLinkedMaxMs)
		fmt.Fprintf(tw, "  sends answered before the kill / not on phones then / lost\t%d / %d / %d\t0 lost\n", r.RestartAnswered, r.RestartBehind, r.RestartLost)
	}
	if r.BulkStored > 0 && r.Measured(bench.PhaseBulk) {
		fmt.Fprintf(tw, "bulk sends (1,000 a request): stored / dispatched\t%.0f / %.0f /s\t\n", r.BulkStoredPerSec, r.BulkDispatchPerSec)
	}
	if r.Measured(bench.PhaseLatency) {
		fmt.Fprintf(tw, "send -> frame on phone at %d/s, p50 / p99\t%.2f / %.2f ms\tp99 < 5 ms\n", r.SendRate, r.SendP50ms, r.SendP99ms)
	}
	if r.Measured(bench.PhaseWebhook) {
		fmt.Fprintf(tw, "inbound -> webhook received, p50 / p99\t%.2f / %.2f ms\tp99 < 50 ms\n", r.WebhookP50ms, r.WebhookP99ms)
	}
	if r.StoredMessages > 0 && r.Measured(bench.PhaseLists) {
		fmt.Fprintf(tw, "history page p99 (%d stored)\t%.2f ms\t< 5 ms\n", r.StoredMessages, r.HistoryP99ms)
		fmt.Fprintf(tw, "conversation list p99\t%.2f ms\t\n", r.ConversationsP99)
	}
	if r.Measured(bench.PhaseDashboards) {
		fmt.Fprintf(tw, "dashboard summary, p50 / p99\t%.2f / %.2f ms\tp99 < 5 ms\n", r.DashboardP50ms, r.DashboardP99ms)
		fmt.Fprintf(tw, "analytics, 90 days of all devices, p50 / p99\t%.2f / %.2f ms\tp99 < 5 ms\n", r.Analytics90P50ms, r.Analytics90P99ms)
	}
	_ = tw.Flush()
	if r.PhonesNote != "" {
		fmt.Fprintf(w, "\nnote: %s\n", r.PhonesNote)
	}
	if r.WebhookNote != "" {
		fmt.Fprintf(w, "note: webhook %s\n", r.WebhookNote)
	}
	if r.Interrupted != "" {
		fmt.Fprintf(w, "note: stopped by a signal during the %s phase: it and the phases after it were not measured\n", r.Interrupted)
	}
}
