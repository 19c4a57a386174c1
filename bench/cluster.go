package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/simrelay/simrelay/android-protocol/client"
)

// ClusterConfig sets a run of `simrelay bench --nodes N`: N serve
// processes on one PostgreSQL database and one NATS bus.
type ClusterConfig struct {
	Binary      string
	Nodes       int           // serve processes (>= 2)
	Phones      int           // phones, spread over the nodes (300)
	SendFor     time.Duration // each throughput phase, on 1 node then on N (10 s; 0: skip them)
	Senders     int           // concurrent REST senders, spread over the nodes (64)
	Rate        int           // sends per second of each latency phase (200)
	RateFor     time.Duration // each latency phase, same node and other node (5 s; 0: skip them)
	Failover    int           // phones on the node killed in the failover phase (20; 0: skip it)
	DatabaseURL string        // an empty PostgreSQL database of the bench's own (required)
	NATSURL     string        // the bus (required): the bench starts no NATS server
	Log         io.Writer
	ServerArgs  []string // extra flags for every node
}

// ClusterDefaults of a cluster run.
func ClusterDefaults() ClusterConfig {
	return ClusterConfig{Nodes: 3, Phones: 300, SendFor: 10 * time.Second, Senders: 64, Rate: 200, RateFor: 5 * time.Second, Failover: 20}
}

// ClusterReport is what a cluster run measured.
type ClusterReport struct {
	Machine string `json:"machine"`
	Store   string `json:"store"` // always postgres
	Nodes   int    `json:"nodes"`
	Phones  int    `json:"phones"`
	// Durable sends per second (answered 2xx, taken and acked by their
	// phones) with one node, then with all nodes, senders and phones spread.
	OneNodeSendsPerSec float64 `json:"one_node_durable_sends_per_second"`
	NodesSendsPerSec   float64 `json:"n_nodes_durable_sends_per_second"`
	NodesSendsBehind   int64   `json:"n_nodes_sends_not_on_phones_at_phase_end"`
	// Send -> frame on the phone with the send made on the phone's node,
	// then on another node (the signal crosses the bus).
	LatencyRate    int     `json:"send_to_phone_rate_per_second"`
	SameNodeP50ms  float64 `json:"same_node_send_to_phone_p50_ms"`
	SameNodeP99ms  float64 `json:"same_node_send_to_phone_p99_ms"`
	OtherNodeP50ms float64 `json:"other_node_send_to_phone_p50_ms"`
	OtherNodeP99ms float64 `json:"other_node_send_to_phone_p99_ms"`
	// The failover phase: FailoverPhones phones on one node, the node
	// killed (SIGKILL); from the kill to each phone's welcome on another
	// node, and to a send made on another node right after the kill
	// reaching its phone. FailoverLost counts those sends that never did.
	FailoverPhones    int     `json:"failover_phones,omitempty"`
	FailoverLinkP50ms float64 `json:"kill_to_new_link_p50_ms,omitempty"`
	FailoverLinkMaxms float64 `json:"kill_to_new_link_max_ms,omitempty"`
	FailoverSendP50ms float64 `json:"kill_to_send_on_phone_p50_ms,omitempty"`
	FailoverSendMaxms float64 `json:"kill_to_send_on_phone_max_ms,omitempty"`
	FailoverSendsLost int     `json:"failover_sends_lost"`
	// Interrupted names the phase a stop signal cut (as Report's): it and
	// the phases after it were not measured.
	Interrupted string `json:"interrupted,omitempty"`
}

// The phases of a cluster run, in the order RunCluster takes them (the
// first is PhasePrepare).
const (
	ClusterPhaseOneNode  = "one node's durable sends"
	ClusterPhaseNodes    = "the nodes' durable sends"
	ClusterPhaseLatency  = "send -> phone"
	ClusterPhaseFailover = "failover"
)

// RunCluster measures N nodes on one database and one bus. A stop signal
// (ctx ending) cuts the phase under way, as in Run.
func RunCluster(ctx context.Context, cfg ClusterConfig) (rep ClusterReport, err error) {
	phase := PhasePrepare
	defer func() {
		if phase != "" && ctx.Err() != nil {
			rep.Interrupted, err = phase, nil
		}
	}()
	rep = ClusterReport{Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()), Store: "postgres", Nodes: cfg.Nodes}
	switch {
	case cfg.Nodes < 2:
		return rep, fmt.Errorf("bench: a cluster has 2 nodes or more, not %d", cfg.Nodes)
	case cfg.DatabaseURL == "":
		return rep, errors.New("bench: the nodes of a cluster share one PostgreSQL database: give --database-url")
	case cfg.NATSURL == "":
		return rep, errors.New("bench: the nodes of a cluster need a bus: give --nats-url (docs/cluster.md says how to run nats-server)")
	case cfg.Phones < cfg.Nodes || cfg.Failover > cfg.Phones:
		return rep, fmt.Errorf("bench: %d phones: want at least one per node (%d) and the %d of the failover phase", cfg.Phones, cfg.Nodes, cfg.Failover)
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	n, note := phonesWithinLimit(cfg.Phones)
	if n < cfg.Phones {
		return rep, errors.New("bench: " + note)
	}
	if note != "" {
		logf("%s", note)
	}
	rep.Phones = n
	dir, err := os.MkdirTemp("", "simrelay-bench-cluster-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)

	fps := phoneFingerprints(n)
	logf("preparing the database with %d phones ...", n)
	st, err := openStore(ctx, dir, cfg.DatabaseURL)
	if err != nil {
		return rep, err
	}
	key, tokens, _, err := prepare(st, fps)
	st.Close()
	if err != nil {
		return rep, err
	}

	c := &cluster{cfg: cfg, dir: dir, key: key}
	defer c.stop()
	if err := c.start(ctx, 1); err != nil {
		return rep, err
	}
	phase = ClusterPhaseOneNode
	if cfg.SendFor > 0 {
		logf("one node: sending as fast as %d senders can for %s ...", cfg.Senders, cfg.SendFor)
		f, err := connect(ctx, c.urls(), fps, tokens)
		if err != nil {
			return rep, err
		}
		tp, err := throughput(ctx, c.apis, f, fps, cfg.Senders, cfg.SendFor)
		f.stop()
		if err != nil || ctx.Err() != nil {
			return rep, err
		}
		rep.OneNodeSendsPerSec = tp.perSecond
		logf("one node: %.0f durable sends/s (%d answered, %d on phones)", tp.perSecond, tp.answered, tp.received)
	}
	phase = ClusterPhaseNodes
	if err := c.start(ctx, cfg.Nodes); err != nil {
		return rep, err
	}
	// Phone i on node i%N, as connect spreads them.
	if cfg.SendFor > 0 || cfg.RateFor > 0 {
		logf("%d nodes: connecting %d phones, spread ...", cfg.Nodes, n)
		f, err := connect(ctx, c.urls(), fps, tokens)
		if err != nil {
			return rep, err
		}
		defer f.stop()
		if cfg.SendFor > 0 {
			logf("%d nodes: sending as fast as %d senders can for %s, spread ...", cfg.Nodes, cfg.Senders, cfg.SendFor)
			tp, err := throughput(ctx, c.apis, f, fps, cfg.Senders, cfg.SendFor)
			if err != nil || ctx.Err() != nil {
				return rep, err
			}
			rep.NodesSendsPerSec, rep.NodesSendsBehind = tp.perSecond, tp.behind
			logf("%d nodes: %.0f durable sends/s (%d answered, %d on phones)", cfg.Nodes, tp.perSecond, tp.answered, tp.received)
		}
		phase = ClusterPhaseLatency
		if cfg.RateFor > 0 {
			same, err := latency(ctx, func(i int) *apiClient { return c.apis[i%cfg.Nodes] }, f, fps, cfg.Rate, cfg.RateFor)
			if err != nil || ctx.Err() != nil {
				return rep, err
			}
			other, err := latency(ctx, func(i int) *apiClient { return c.apis[(i+1)%cfg.Nodes] }, f, fps, cfg.Rate, cfg.RateFor)
			if err != nil || ctx.Err() != nil {
				return rep, err
			}
			rep.LatencyRate = cfg.Rate
			rep.SameNodeP50ms, rep.SameNodeP99ms = pct(same, 50), pct(same, 99)
			rep.OtherNodeP50ms, rep.OtherNodeP99ms = pct(other, 50), pct(other, 99)
			logf("send -> phone at %d/s: same node p50 %.2f ms, p99 %.2f ms (%d samples); other node p50 %.2f ms, p99 %.2f ms (%d samples)",
				cfg.Rate, rep.SameNodeP50ms, rep.SameNodeP99ms, len(same), rep.OtherNodeP50ms, rep.OtherNodeP99ms, len(other))
		}
		f.stop()
	}
	phase = ClusterPhaseFailover
	if cfg.Failover > 0 {
		var fo ClusterReport
		if err := c.failover(ctx, &fo, fps[:cfg.Failover], tokens[:cfg.Failover], logf); err != nil || ctx.Err() != nil {
			return rep, err
		}
		rep.FailoverPhones, rep.FailoverSendsLost = fo.FailoverPhones, fo.FailoverSendsLost
		rep.FailoverLinkP50ms, rep.FailoverLinkMaxms = fo.FailoverLinkP50ms, fo.FailoverLinkMaxms
		rep.FailoverSendP50ms, rep.FailoverSendMaxms = fo.FailoverSendP50ms, fo.FailoverSendMaxms
	}
	phase = ""
	return rep, nil
}

// cluster is the bench's serve processes.
type cluster struct {
	cfg   ClusterConfig
	dir   string
	key   string
	nodes []*server
	apis  []*apiClient // one per node, in the nodes' order
}

// start starts nodes until there are n, each named bench-<i> with a data
// directory of its own.
func (c *cluster) start(ctx context.Context, n int) error {
	for i := len(c.nodes) + 1; i <= n; i++ {
		name := fmt.Sprintf("bench-%d", i)
		// The balancer links every phone from its one address, so the
		// nodes count no connections per address. A single server keeps
		// the default bound: its phones come from 200 addresses.
		// One public URL for all, as a cluster has (the nodes compare it
		// and warn of a node whose differs); the bench links each phone to
		// a node's own address itself, so what it names is never used.
		args := append([]string{"--nats-url", c.cfg.NATSURL, "--node-name", name, "--max-conns-per-ip", "0", "--public-url", "http://127.0.0.1"}, c.cfg.ServerArgs...)
		srv, err := startServer(ctx, c.cfg.Binary, filepath.Join(c.dir, name), c.cfg.DatabaseURL, os.Stderr, args...)
		if err != nil {
			return fmt.Errorf("bench: node %s: %w", name, err)
		}
		c.nodes = append(c.nodes, srv)
		c.apis = append(c.apis, &apiClient{base: srv.url, key: c.key, hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}})
	}
	return nil
}

func (c *cluster) urls() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.url
	}
	return out
}

// stop ends the nodes still running, each with SIGTERM.
func (c *cluster) stop() {
	for _, s := range c.nodes {
		if s != nil {
			s.stop()
		}
	}
}

// failover links the phones to the last node through a balancer that
// prefers it, kills that node with SIGKILL, sends each phone a message on
// the first node at once, and times each phone's new link (its welcome on
// another node) and that message's arrival, from the kill.
func (c *cluster) failover(ctx context.Context, rep *ClusterReport, fps, tokens []string, logf func(string, ...any)) error {
	victim := len(c.nodes) - 1
	order := []string{strings.TrimPrefix(c.nodes[victim].url, "http://")}
	for _, s := range c.nodes[:victim] {
		order = append(order, strings.TrimPrefix(s.url, "http://"))
	}
	lb, err := newBalancer(order)
	if err != nil {
		return err
	}
	defer lb.close()
	logf("failover: %d phones on node %s, through a balancer ...", len(fps), "bench-"+fmt.Sprint(victim+1))
	// The reference client's own backoff: the time to a new link is mostly
	// the phone's wait before it tries again.
	f, err := connectBackoff(ctx, []string{lb.url()}, fps, tokens, client.DefaultBackoffBase, client.DefaultBackoffMax)
	if err != nil {
		return err
	}
	defer f.stop()
	for len(f.lat) > 0 {
		<-f.lat
	}
	rep.FailoverPhones = len(fps)

	killed := time.Now()
	_ = c.nodes[victim].cmd.Process.Kill()
	_ = c.nodes[victim].cmd.Wait()
	c.nodes[victim] = nil // nothing left to stop
	// Sends made on a live node once the kill is done, each answered 2xx
	// (stored) before its phone has a link again; timed from the kill. The
	// balancer gives the phones to the first node: with three nodes or more
	// the sends are made on another, so they cross the bus as well.
	via := max(victim-1, 0)
	for i, fp := range fps {
		text := fmt.Sprintf("failover %d", i)
		f.sent.Store(text, killed)
		code, body, err := c.apis[via].do("POST", "/chat/send", map[string]string{"device_fingerprint": fp, "phone": "+15551234567", "message": text})
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("bench: failover send on %s: %d %s %v", c.nodes[via].url, code, body, err)
		}
	}

	var links, sends []time.Duration
	deadline := time.Now().Add(60 * time.Second)
	for len(sends) < len(fps) && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case l := <-f.lat:
			sends = append(sends, l)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i := range fps {
		if at := f.upAt[i].Load(); at > killed.UnixNano() {
			links = append(links, time.Duration(at-killed.UnixNano()))
		}
	}
	rep.FailoverSendsLost = len(fps) - len(sends)
	rep.FailoverLinkP50ms, rep.FailoverLinkMaxms = pct(links, 50), pct(links, 100)
	rep.FailoverSendP50ms, rep.FailoverSendMaxms = pct(sends, 50), pct(sends, 100)
	logf("failover: kill -> new link p50 %.0f ms, max %.0f ms (%d of %d phones); kill -> send on the phone p50 %.0f ms, max %.0f ms, %d not arrived",
		rep.FailoverLinkP50ms, rep.FailoverLinkMaxms, len(links), len(fps), rep.FailoverSendP50ms, rep.FailoverSendMaxms, rep.FailoverSendsLost)
	if len(links) < len(fps) {
		return fmt.Errorf("bench: failover: only %d of %d phones linked again within 60s", len(links), len(fps))
	}
	return nil
}
