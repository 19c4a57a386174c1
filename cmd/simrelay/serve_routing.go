package main

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/gateway"
)

// routingFlags adds the gateway's cluster knob: the period of the sweep
// that covers lost kicks and link signals (docs/cluster.md).
func routingFlags(fs *flag.FlagSet, every *time.Duration) {
	fs.DurationVar(every, "link-sweep", cluster.DefaultSweepEvery, "in a cluster, how often each node re-pumps its phone links and re-checks they are their device's newest: the bound on how late a signal the bus lost is covered")
}

// helloTimeoutFlag adds --hello-timeout, a knob for tests: the conformance
// suite (android-protocol/conformance) runs the binary and checks the 4001
// close of a phone that sends no hello, which at PROTOCOL.md's 10 s was
// most of the suite's time. Longer than the protocol's 10 s is refused: a
// phone is promised no more; shorter breaks no phone that sends its hello
// at once, as section 7.1 asks, but one on a slow network needs the 10 s.
func helloTimeoutFlag(fs *flag.FlagSet, timeout *time.Duration) {
	fs.DurationVar(timeout, "hello-timeout", gateway.DefaultHelloTimeout, "for tests only: how long a phone link may go without its hello before the server closes it 4001 (PROTOCOL.md section 7.1's 10s); 1s to 10s; never shorten it in service")
}

// minHelloTimeout keeps a test's server from closing the links of phones
// that send their hello at once but run on a loaded machine.
const minHelloTimeout = time.Second

func validateHelloTimeout(timeout time.Duration) error {
	if timeout < minHelloTimeout || timeout > gateway.DefaultHelloTimeout {
		return fmt.Errorf("%s %s: want %s to %s (how long a phone link may go without its hello)", both("hello-timeout"), timeout, minHelloTimeout, gateway.DefaultHelloTimeout)
	}
	return nil
}

// The range of --link-sweep. Below minLinkSweep the sweep turns into a busy
// loop of queue reads. Above maxLinkSweep it stops keeping contract
// section 12's promise that a signal the bus lost delays a send "at most a
// few seconds": the sweep is that bound. maxLinkSweep is the default live
// window of a node (--node-live-window), the other "few seconds" of the
// cluster: a lost signal then waits no longer than a dead node takes to be
// known dead. It stays so with a shorter window: the sweep's period and
// the window bound different delays, and a cluster that shortens its
// window to know dead nodes sooner need not sweep more often.
const (
	minLinkSweep = 100 * time.Millisecond
	maxLinkSweep = defaultNodeLiveWithin
)

func validateLinkSweep(every time.Duration) error {
	if every < minLinkSweep || every > maxLinkSweep {
		return fmt.Errorf("%s %s: want %s to %s (the longest a send waits when the bus lost its signal; each sweep reads every linked phone's queue once)",
			both("link-sweep"), every, minLinkSweep, maxLinkSweep)
	}
	return nil
}

// phoneRoutes is the phones' links as the other services reach them: the
// hub itself on one node; in a cluster, the hub behind a cluster.Gateway
// that routes kicks and controls to the node holding the link.
type phoneRoutes interface {
	Kick(fingerprint string, deviceID uint64)
	Release(fingerprint string, deviceID uint64)
	Online(fingerprint string, deviceID uint64) bool
	LastSeen(fingerprint string, deviceID uint64) time.Time
	Presence(devices map[string]uint64) map[string]time.Time
	OfflineSince(fingerprint string, deviceID uint64) time.Time
	HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error
	Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{}
	Configure(fingerprint string, deviceID uint64, cfg proto.Config)
	Pace(fingerprint string, deviceID uint64, perMinute int)
}

// routing is the node's phone routes; gw is nil on one node.
type routing struct {
	phoneRoutes
	gw *cluster.Gateway
	// presenceOnline is what device presence asks before it reports a
	// device offline.
	presenceOnline func(fingerprint string, deviceID uint64) bool
}

// routePhones puts the hub behind the cluster's gateway when the node has
// a bus; without one (bbolt, or PostgreSQL alone) nothing of it runs.
// jobLife is the hub's (gateway.Config.JobLife).
func routePhones(node *clusterNode, hub *gateway.Hub, sweepEvery, jobLife time.Duration, log *slog.Logger) (*routing, error) {
	if node.bus == nil {
		return &routing{phoneRoutes: hub, presenceOnline: hub.Online}, nil
	}
	gw, err := cluster.NewGateway(cluster.GatewayConfig{Bus: node.bus, Store: node.pg, Hub: hub, Live: node.liveWithin, SweepEvery: sweepEvery, Steady: node.beats.Steady, Current: node.beats.Current,
		JobLife: jobLife, Now: node.now(), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("phone routing: %w", err)
	}
	hub.SetEpochs(gw)
	return &routing{phoneRoutes: gw, gw: gw, presenceOnline: gw.PresenceOnline}, nil
}
