package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/simrelay/simrelay/bench"
)

// benchNodesFlags are the flags of `simrelay bench --nodes N`.
type benchNodesFlags struct {
	nodes    int
	natsURL  string
	failover int
}

// benchNodes0 is the flags' defaults: a single-node bench.
var benchNodes0 = benchNodesFlags{nodes: 1, failover: bench.ClusterDefaults().Failover}

func addBenchNodesFlags(fs *flag.FlagSet) *benchNodesFlags {
	c := benchNodes0
	fs.IntVar(&c.nodes, "nodes", c.nodes, "serve processes to start on one PostgreSQL database and one NATS bus (2 or more: the cluster bench, with --database-url and --nats-url)")
	fs.StringVar(&c.natsURL, "nats-url", "", "the NATS server the cluster bench's nodes share, nats://host:port (the bench starts none: see docs/cluster.md)")
	fs.IntVar(&c.failover, "failover-phones", c.failover, "phones on the node the cluster bench kills (0: skip the failover phase)")
	return &c
}

// singleNodeOnly are the flags of phases the cluster bench does not run.
var singleNodeOnly = []string{"messages", "queries", "drain-jobs", "pool-for", "bulk-requests", "restart-after", "inbound-rate", "inbound-for", "slow-sync", "pprof-listen"}

// benchCluster runs the cluster bench. Its phases take their sizes from the
// single-node flags they share (--phones, --send-for, --senders, --rate,
// --rate-for); --phones and --rate default lower, as every node runs on
// the same machine as the bench.
func benchCluster(ctx context.Context, fs *flag.FlagSet, cl *benchNodesFlags, single bench.Config, databaseURL, jsonPath string, stdout, stderr io.Writer) int {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range singleNodeOnly {
		if set[name] {
			fmt.Fprintf(stderr, "simrelay bench: %s sizes a phase of the single-node bench: the cluster bench (%s) has none\n", both(name), both("nodes"))
			return 2
		}
	}
	cfg := bench.ClusterDefaults()
	cfg.Nodes, cfg.NATSURL, cfg.Failover, cfg.DatabaseURL = cl.nodes, cl.natsURL, cl.failover, databaseURL
	cfg.SendFor, cfg.Senders, cfg.RateFor = single.SendFor, single.Senders, single.RateFor
	if set["phones"] {
		cfg.Phones = single.Phones
	}
	if set["rate"] {
		cfg.Rate = single.Rate
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 1
	}
	cfg.Binary, cfg.Log = bin, stderr
	rep, err := bench.RunCluster(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "simrelay bench: %v\n", err)
		return 1
	}
	printClusterReport(stdout, rep)
	code := writeReport(rep, jsonPath, stdout, stderr)
	if code == 0 && rep.Interrupted != "" {
		return interrupted(stderr, rep.Interrupted)
	}
	return code
}

func printClusterReport(w io.Writer, r bench.ClusterReport) {
	fmt.Fprintf(w, "simrelay bench %s on %s, %d nodes on one PostgreSQL and one NATS, %d phones\n\n", buildVersion(), r.Machine, r.Nodes, r.Phones)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tresult")
	switch {
	case r.NodesSendsPerSec > 0:
		fmt.Fprintf(tw, "durable sends, answered and acked by the phone: 1 node / %d nodes\t%.0f / %.0f /s\n", r.Nodes, r.OneNodeSendsPerSec, r.NodesSendsPerSec)
	case r.OneNodeSendsPerSec > 0:
		fmt.Fprintf(tw, "durable sends, answered and acked by the phone: 1 node\t%.0f /s\n", r.OneNodeSendsPerSec)
	}
	if r.LatencyRate > 0 {
		fmt.Fprintf(tw, "send -> frame on phone at %d/s, phone on the same node, p50 / p99\t%.2f / %.2f ms\n", r.LatencyRate, r.SameNodeP50ms, r.SameNodeP99ms)
		fmt.Fprintf(tw, "send -> frame on phone at %d/s, phone on another node, p50 / p99\t%.2f / %.2f ms\n", r.LatencyRate, r.OtherNodeP50ms, r.OtherNodeP99ms)
	}
	if r.FailoverPhones > 0 {
		fmt.Fprintf(tw, "kill -9 of a node -> its %d phones' new links, p50 / max\t%.0f / %.0f ms\n", r.FailoverPhones, r.FailoverLinkP50ms, r.FailoverLinkMaxms)
		fmt.Fprintf(tw, "kill -9 -> a send made at once on another node on the phone, p50 / max\t%.0f / %.0f ms\n", r.FailoverSendP50ms, r.FailoverSendMaxms)
		fmt.Fprintf(tw, "  of those sends, never on the phone\t%d\n", r.FailoverSendsLost)
	}
	_ = tw.Flush()
	if r.Interrupted != "" {
		fmt.Fprintf(w, "\nnote: stopped by a signal during the %s phase: it and the phases after it were not measured\n", r.Interrupted)
	}
}
