package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/cliflag"
	"github.com/simrelay/simrelay/store/postgres"
)

// clusterConfig is how a node joins a cluster (contract section 12).
type clusterConfig struct {
	natsURL  string
	nodeName string
	// liveWithin is the registry's live window (--node-live-window,
	// serve_cluster_timing.go).
	liveWithin time.Duration
}

func clusterFlags(fs *flag.FlagSet, c *clusterConfig) {
	fs.StringVar(&c.natsURL, "nats-url", "", "the bus between the nodes of a cluster, nats://host:port[,nats://host:port]; needs --database-url; empty: one node")
	fs.StringVar(&c.nodeName, "node-name", "", "this node's name, unique in the cluster, in logs and metrics (default the short host name and the listen port, e.g. web1-8080)")
	liveWindowFlag(fs, &c.liveWithin)
}

func (c clusterConfig) validate(postgresStore bool) error {
	if c.nodeName != "" && !postgresStore {
		return fmt.Errorf("%s names a node among those sharing one PostgreSQL database: give %s too (the embedded store serves one node)", both("node-name"), both(cliflag.DatabaseURLFlag))
	}
	if c.natsURL != "" && !postgresStore {
		return fmt.Errorf("%s joins a cluster, whose nodes share one PostgreSQL database: give %s too (the embedded store serves one node)", both("nats-url"), both(cliflag.DatabaseURLFlag))
	}
	if c.natsURL != "" {
		if err := (cluster.Config{URL: c.natsURL, Node: "x"}).Validate(); err != nil {
			return fmt.Errorf("%s: %v", both("nats-url"), err)
		}
	}
	if c.nodeName != "" {
		if err := (cluster.Config{URL: "nats://x:1", Node: c.nodeName}).Validate(); err != nil {
			return fmt.Errorf("%s: %v", both("node-name"), err)
		}
	}
	return validateLiveWindow(c.liveWithin)
}

// defaultNodeName is the short host name and the port the node listens on:
// unique for nodes on one machine, readable in logs.
func defaultNodeName(addr net.Addr) string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	if host == "" {
		host = "node"
	}
	port := "0"
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = fmt.Sprint(tcp.Port)
	}
	return host + "-" + port
}

// clusterNode is this server's place among the nodes on its database. On
// the embedded store it is empty: one node, no registry, no bus.
type clusterNode struct {
	name     string
	instance string
	// pg is the store when on PostgreSQL; nil on the embedded store.
	pg *postgres.Store
	// bus is the bus to the other nodes; nil without --nats-url.
	bus *cluster.Bus
	// beats records whether this node's beats reach the database unbroken:
	// it judges other nodes dead by their silence only while they do.
	beats *cluster.Beats
	log   *slog.Logger
	// version is this node's build (buildVersion), as the registry records
	// it for the other nodes.
	version string
	// versions logs the live nodes that run another build; nodesByVersion
	// counts the live nodes by build for /metrics, and shown are the
	// versions it has a series for. The beat loop (run) owns all three.
	versions       *cluster.Versions
	nodesByVersion *prometheus.GaugeVec
	shown          map[string]bool
	// heard is the bus's census of the other nodes (cluster.Peers), set by
	// hear; unheard logs the live nodes it lacks, and unheardNodes counts
	// them for /metrics. The beat loop (run) owns unheard.
	heard        interface{ Live() []string }
	unheard      *cluster.Unheard
	unheardNodes prometheus.Gauge
	// beatLog logs the beats the database did not take, spaced.
	beatLog *beatLog
	// lost is closed when the registry gave this node's name to another
	// process (this one stopped beating for too long): the node stops.
	lost chan struct{}
	// liveWithin is the registry's live window, beatEvery the period of
	// this node's beats in it (serve_cluster_timing.go).
	liveWithin, beatEvery time.Duration
	// clock is the node's clock moved to the database server's (measured at
	// the start and at each beat): every service times its work by it
	// (now). Nil on the embedded store.
	clock *cluster.Clock
}

// joinCluster registers the node on its database (refusing to start where
// the rules of section 12 say so) and connects the bus. Call leave when
// the node stops.
func joinCluster(ctx context.Context, cfg clusterConfig, addr net.Addr, st backend, log *slog.Logger) (*clusterNode, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return &clusterNode{}, nil
	}
	name := cfg.nodeName
	if name == "" {
		name = defaultNodeName(addr)
	}
	// Every line of the registry and of the bus names the node, as the
	// server's own lines do (logger): a bus lost by one node of three is
	// otherwise a line that no node's log can be told from.
	log = log.With("node", name)
	// The instance is the store's lease holder: the other nodes end the
	// outbox leases of an instance whose beat stopped (EndDeadLeases).
	live, beat := cfg.timing()
	n := &clusterNode{name: name, instance: pg.Holder(), pg: pg, log: log.With("component", "cluster"), lost: make(chan struct{}),
		liveWithin: live, beatEvery: beat, clock: cluster.NewClock(time.Now, log.With("component", "cluster")),
		beats: cluster.NewBeats(live, beat, time.Now), beatLog: &beatLog{log: log.With("component", "cluster")}, version: buildVersion(),
		versions: cluster.NewVersions(buildVersion(), log.With("component", "cluster")), shown: map[string]bool{},
		nodesByVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "simrelay_cluster_nodes",
			Help: "The live nodes on this node's database (their beat within the live window), by the simrelay version each runs, as this node last read the registry; more than one version is a mixed cluster (docs/cluster.md, Upgrading the nodes).",
		}, []string{"version"}),
		unheard: cluster.NewUnheard(live, log.With("component", "cluster")),
		unheardNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "simrelay_cluster_nodes_unheard",
			Help: "Live nodes on this node's database that this node has not heard on its bus for the live window (--node-live-window, 10 s by default): their bus is down, or they were given another --nats-url (docs/cluster.md). Anything but 0 is a split cluster.",
		})}
	if cfg.natsURL != "" {
		bus, err := connectBus(ctx, cfg.natsURL, n.name, pg, log.With("component", "bus"))
		if err != nil {
			return nil, err
		}
		n.bus = bus
	}
	if err := n.register(ctx); err != nil {
		if n.bus != nil {
			n.bus.Close()
		}
		return nil, err
	}
	// Leases of processes that died (this node's previous run among them)
	// go back at once, not at the first beat; run does it after each beat
	// once the node's beats are steady. The database answered the
	// registration just now; a node starting the moment it comes back from
	// an outage may give back the leases of live nodes, whose deliveries
	// are then attempted again (at least once, as across a crash).
	n.beats.Beat(true)
	n.endDeadLeases()
	// Before any service reads the clock: a node whose clock is off starts
	// on the database's time, not on its own for a beat.
	n.measureClock()
	return n, nil
}

// now is the clock the node's services time their work by: the database
// server's on PostgreSQL (cluster.Clock), the machine's on the embedded
// store.
func (n *clusterNode) now() func() time.Time {
	if n.clock == nil {
		return time.Now
	}
	return n.clock.Now
}

// measureClock reads the database server's clock and moves the node's to it
// (cluster.Clock). A reading that fails changes nothing: the next beat
// reads again, and the beats' own log tells of a database that does not
// answer.
func (n *clusterNode) measureClock() {
	if err := n.clock.Measure(n.pg.DatabaseTime); err != nil {
		n.log.Debug("read the database's clock", "err", err)
	}
}

// connectBus joins the bus of the cluster whose database pg is: on the
// subjects of that database's cluster id (cluster.Prefix), so that another
// cluster given the same NATS server or account hears nothing of this one.
func connectBus(ctx context.Context, url, name string, pg *postgres.Store, log *slog.Logger) (*cluster.Bus, error) {
	prefix, err := cluster.Prefix(pg)
	if err != nil {
		return nil, err
	}
	bus, err := cluster.Connect(ctx, cluster.Config{URL: url, Node: name, Prefix: prefix, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%s: %w (a node with a bus refuses to start without it)", both("nats-url"), err)
	}
	return bus, nil
}

// endDeadLeases gives the outbox leases of nodes that are not live back to
// the outboxes, so their webhooks and mails go now rather than after their
// lease (60 s).
func (n *clusterNode) endDeadLeases() {
	if ended, err := n.pg.EndDeadLeases(n.liveWithin); err != nil {
		n.log.Warn("end the outbox leases of dead nodes", "err", err)
	} else if ended > 0 {
		n.log.Info("ended the outbox leases of nodes that are gone; their webhooks and mails go again", "leases", ended)
	}
}

// register writes the node into the registry. The live node in the way
// of a refusal may be a node killed a moment ago (this node's own previous
// run, or another single node the operator replaced): its last beat counts
// for the live window. So the node waits, up to that window and a beat,
// to see whether the other's beat moves: refused if it does (the other
// really runs), registered once the beat has aged.
func (n *clusterNode) register(ctx context.Context) error {
	me := postgres.Node{Name: n.name, Bus: n.bus != nil, Instance: n.instance, Version: n.version}
	for tries := 0; ; tries++ {
		err := n.pg.RegisterNode(me, n.liveWithin)
		refused := (*postgres.NodeRefused)(nil)
		if !errors.As(err, &refused) || tries == 3 {
			return nodeRefusal(err)
		}
		if alive, e := n.stillBeats(ctx, refused.Other); e != nil || alive {
			if e != nil {
				return e
			}
			return nodeRefusal(err)
		}
	}
}

// stillBeats watches the named node's beat for up to the live window and
// a beat: true as soon as it moves, false once it is older than the window.
func (n *clusterNode) stillBeats(ctx context.Context, other string) (bool, error) {
	first, _, err := n.pg.NodeSeen(other)
	if err != nil {
		return false, err
	}
	n.log.Warn("another node on the database beat a moment ago: waiting to see whether it still runs", "other", other, "wait", n.liveWithin)
	deadline := time.Now().Add(n.liveWithin + n.beatEvery)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(n.beatEvery / 2):
		}
		seen, now, err := n.pg.NodeSeen(other)
		if err != nil {
			return false, err
		}
		if seen.After(first) {
			return true, nil
		}
		if now.Sub(seen) > n.liveWithin {
			return false, nil
		}
	}
	return true, nil
}

func nodeRefusal(err error) error {
	if refused := (*postgres.NodeRefused)(nil); errors.As(err, &refused) {
		return fmt.Errorf("this node cannot join the database's nodes: %s", refused.Reason)
	}
	return err
}

// logger names the node in every log line of a node on PostgreSQL.
func (n *clusterNode) logger(log *slog.Logger) *slog.Logger {
	if n.name == "" {
		return log
	}
	return log.With("node", n.name)
}

// metrics registers simrelay_node_info{node="..."} 1, so a scrape of every
// node's /metrics tells the nodes apart.
func (n *clusterNode) metrics(reg prometheus.Registerer) {
	if n.name == "" {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "simrelay_node_info",
		Help:        "This node's name in the cluster (--node-name), and whether it has a bus (--nats-url); always 1.",
		ConstLabels: prometheus.Labels{"node": n.name, "bus": onOff(n.bus != nil)},
	}, func() float64 { return 1 }))
	reg.MustRegister(n.nodesByVersion)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "simrelay_cluster_clock_offset_seconds",
		Help: "What this node adds to its own clock to time its work by the database server's (docs/cluster.md, Clocks); 0 while they agree within 0.25 s. Anything else: fix NTP on the node or the database server.",
	}, func() float64 { return n.clock.Offset().Seconds() }))
	if n.bus != nil {
		reg.MustRegister(n.unheardNodes)
	}
}

// hear gives the node the bus's census of the other nodes, which its beats
// compare with the registry's live nodes (checkNodes).
func (n *clusterNode) hear(census interface{ Live() []string }) {
	n.heard = census
}

// readiness is the bus as /readyz asks it; nil without a bus.
func (n *clusterNode) readiness() interface{ Ready(context.Context) error } {
	if n.bus == nil {
		return nil
	}
	return n.bus
}

// run beats the node's row until ctx ends. A beat that finds the row taken
// by another instance (this node was silent for longer than the live
// window, and another process took the name) closes lost.
func (n *clusterNode) run(ctx context.Context) {
	if n.pg == nil {
		return
	}
	t := time.NewTicker(n.beatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ok, err := n.pg.NodeBeat(n.name, n.instance)
			n.beats.Beat(err == nil && ok)
			if err != nil {
				n.beatLog.failed(time.Now(), err, n.liveWithin)
			} else {
				n.beatLog.written(time.Now())
				n.measureClock()
			}
			switch {
			case err != nil: // logged above, spaced
			case !ok:
				n.log.Error("this node's row in the registry is gone or another process's: while this node was silent, another process took its name or the server's keys were rotated (admin rotate-keys); stopping", "node", n.name)
				close(n.lost)
				return
			case !n.beats.Steady():
				// Beats broke within the live window: the database may have
				// been gone for every node, whose beats then aged with this
				// one's. Their silence says nothing yet (cluster.Beats).
			default: // this node is live and was all along: it may judge the others
				n.endDeadLeases()
				n.checkNodes()
			}
		}
	}
}

// checkNodes reads the live nodes from the registry and checks their
// builds (checkVersions) and that this node hears them on its bus
// (checkHeard). It runs after a steady beat only, as endDeadLeases does:
// after a break every node's beat may have aged at once, and the others
// would seem gone.
func (n *clusterNode) checkNodes() {
	nodes, err := n.pg.LiveNodes(n.liveWithin)
	if err != nil {
		n.log.Warn("read the live nodes", "err", err)
		return
	}
	n.checkVersions(nodes)
	n.checkHeard(nodes)
}

// checkHeard logs the live nodes with a bus that this node's census has
// not heard for the live window (cluster.Unheard): a node given another
// --nats-url than this one. While this node's own bus is down it hears
// nobody, which the bus logs itself: nothing is judged then.
func (n *clusterNode) checkHeard(nodes []postgres.Node) {
	if n.bus == nil || n.heard == nil {
		return
	}
	if !n.bus.Connected() {
		n.unheard.Reset()
		n.unheardNodes.Set(0)
		return
	}
	var live []string
	for _, o := range nodes {
		if o.Bus && o.Name != n.name {
			live = append(live, o.Name)
		}
	}
	n.unheard.Observe(time.Now(), live, n.heard.Live())
	n.unheardNodes.Set(float64(n.unheard.Count()))
}

// checkVersions logs the live nodes' builds that differ from this node's
// (cluster.Versions) and counts the nodes by build for /metrics. A mixed
// cluster is not refused (docs/cluster.md).
func (n *clusterNode) checkVersions(nodes []postgres.Node) {
	seen := make([]cluster.NodeVersion, len(nodes))
	count := map[string]int{}
	for i, o := range nodes {
		seen[i] = cluster.NodeVersion{Name: o.Name, Version: o.Version}
		count[o.Version]++
	}
	// The gauges first, then the log: whoever reads the log's line (an
	// operator, TestClusterNoticesMixedVersions) finds /metrics saying the
	// same already.
	for v := range n.shown {
		if count[v] == 0 {
			n.nodesByVersion.DeleteLabelValues(v)
			delete(n.shown, v)
		}
	}
	for v, c := range count {
		n.nodesByVersion.WithLabelValues(v).Set(float64(c))
		n.shown[v] = true
	}
	n.versions.Observe(time.Now(), seen)
}

// leave removes the node from the registry and closes the bus.
func (n *clusterNode) leave() {
	if n.pg != nil {
		if err := n.pg.LeaveNode(n.name, n.instance); err != nil {
			n.log.Warn("leave the node registry", "err", err)
		}
	}
	if n.bus != nil {
		n.bus.Close()
	}
}
