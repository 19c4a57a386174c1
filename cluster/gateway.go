package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/retention"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// The gateway across nodes (docs/cluster.md, "How nodes share the work:
// routing"). A phone's link lives on one node; sends, disconnects and
// settings changes happen on any. The node acting does its part locally,
// then tells the others over the bus; the node holding the link acts on
// it. Every signal is a hint: the database is the truth, and each node's
// sweep (SweepEvery) re-pumps its links and re-checks their epochs, so a
// lost signal delays a send or a 4009 by at most one sweep.

// Defaults, and why.
const (
	// DefaultSweepEvery bounds how late a lost kick or link signal is
	// covered; each sweep costs a query for the node's epochs, one for
	// its devices deleted or disabled, and one queue read per link.
	DefaultSweepEvery = 5 * time.Second
	// kickCoalesce is how long kicks for devices linked elsewhere gather
	// before one message carries them all: at high send rates a node
	// publishes at most 1/kickCoalesce kick messages a second, whatever
	// the rate, and each node looks every fingerprint up in its own map.
	kickCoalesce = 5 * time.Millisecond
	// kickBatch bounds the devices of one kick message (far below NATS's
	// 1 MiB payload limit).
	kickBatch = 2000
	// orphanBatch bounds the dead node's links one sweep ends.
	orphanBatch = 1000
)

// Topics of the gateway.
const (
	topicKick = "gw.kick" // devices with new jobs: a fingerprint a line, each followed by "/<device id>", and "/release" for a release (wireKicks)
	topicLink = "gw.link" // "fingerprint epoch": a link registered
	topicCtl  = "gw.ctl"  // a control (ctl) for the device's link
)

// Hub is the node's phone links as the gateway uses them (gateway.Hub).
// Every per-device question and order names the device by fingerprint and
// id: the fingerprint's link here of another device (one deleted whose
// link is not closed yet, or the one paired again after it) is not the
// device's.
type Hub interface {
	Online(fingerprint string, deviceID uint64) bool
	LastSeen(fingerprint string, deviceID uint64) time.Time
	Presence(devices map[string]uint64) map[string]time.Time
	OfflineSince(fingerprint string, deviceID uint64) time.Time
	HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error
	// KickLinked kicks the device's link here when it is open, and says
	// whether it was (false: nothing done); release marks a release, after
	// agent jobs the device's link passed over may have become its own
	// (their agent deleted, or linked again without naming them in its
	// hello's jobs; their number resumed): the link reads them again. It
	// returns at once (the link pumps on a goroutine of its own); Repump
	// is a release on the caller's goroutine, for the sweep, which pumps
	// the node's links one after another.
	KickLinked(fingerprint string, deviceID uint64, release bool) bool
	Repump(fingerprint string, deviceID uint64)
	Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{}
	// DisconnectChanged is Disconnect of a control heard from another
	// node: only a link whose device a look at the store finds deleted,
	// disabled or with another token now is closed; false when the store
	// did not answer (the link was closed as told). deviceID 0 (a control
	// of an older node, which names the fingerprint alone): whichever link
	// holds the fingerprint.
	DisconnectChanged(fingerprint string, deviceID uint64, code int, reason string) bool
	// Refresh is Configure and Pace of a control heard from another node:
	// the link gets its own device's settings and pace as stored now;
	// false when the store did not answer. deviceID 0 as for
	// DisconnectChanged.
	Refresh(fingerprint string, deviceID uint64) bool
	Configure(fingerprint string, deviceID uint64, cfg proto.Config)
	Pace(fingerprint string, deviceID uint64, perMinute int)
	Links() []gateway.Link
	// LinkDevice is the device of the fingerprint's open link here;
	// FenceDevice fences that device's link only, not another device's
	// link of the fingerprint.
	LinkDevice(fingerprint string) (uint64, bool)
	FenceDevice(fingerprint string, deviceID, newest uint64)
	// DisconnectLink and FenceLink act on the link given (Links) only, not
	// on a later one of the fingerprint.
	DisconnectLink(l gateway.Link, code int, reason string) <-chan struct{}
	FenceLink(l gateway.Link, newest uint64)
}

// LinkStore is the database's record of the devices' links
// (*postgres.Store, table device_links).
type LinkStore interface {
	ClaimLink(deviceID uint64, node string) (uint64, error)
	LinkEpochs(deviceIDs []uint64) (map[uint64]uint64, error)
	// GoneDevices answers, of the devices given, those deleted (true) or
	// disabled (false); one without a row (its company removed) is deleted.
	GoneDevices(deviceIDs []uint64) (map[uint64]bool, error)
	EndLink(deviceID, epoch uint64) error
	LinkedSince(deviceID uint64, live time.Duration) (time.Time, bool, error)
	LinkedSinceMany(deviceIDs []uint64, live time.Duration) (map[uint64]time.Time, error)
	EndOrphanLinks(live time.Duration, limit int, node string) ([]store.Device, error)
	// LeftOnline answers the devices still reported online whose last
	// link ended on a node not live: their offline checks died with it.
	LeftOnline(live time.Duration, limit int) ([]store.Device, error)
	ReopenLinks(node string, links map[uint64]uint64) ([]uint64, error)
	HoldLink(deviceID uint64, live time.Duration, fn func(node string, epoch uint64, open, nodeLive bool, endedAgo time.Duration) error) error
	// MessageSequence is the highest queue place given to a job yet.
	MessageSequence() (uint64, error)
}

// GatewayConfig wires a Gateway.
type GatewayConfig struct {
	Bus   *Bus
	Store LinkStore
	Hub   Hub
	// Live is how recent a node's beat must be for its links to count.
	Live time.Duration
	// SweepEvery is the sweep's period (DefaultSweepEvery when 0).
	SweepEvery time.Duration
	// Steady says whether this node's own beats have reached the database
	// unbroken for the live window (Beats.Steady): the sweep ends the links
	// of silent nodes only then. Nil: always.
	Steady func() bool
	// Current says whether this node's last beat was written just now
	// (Beats.Current): the other nodes take it for live, so its links
	// ended while it was silent may be reopened (reopen). Nil: always.
	Current func() bool
	// JobLife is the longest a job handed to a phone may stay queued
	// (sms.MaxQueuedLife, as the hub's gateway.Config.JobLife): how long
	// the node remembers the links of dead nodes it took over
	// (gateway_forget.go). Zero: that of the default time to live.
	JobLife time.Duration
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// ctl is a control of a device's link, for the node that holds it. Device
// is the device's id; a node of an older version sends none (0), and its
// control is of whichever link holds the fingerprint (runCtls).
type ctl struct {
	Op          string        `json:"op"` // disconnect, configure, pace
	Fingerprint string        `json:"fp"`
	Device      uint64        `json:"device,omitempty"`
	Code        int           `json:"code,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	Config      *proto.Config `json:"config,omitempty"`
	PerMinute   int           `json:"per_minute,omitempty"`
}

// Gateway routes the gateway's work across the nodes: it is the node's
// Dispatcher (sms, channel), Phones (httpapi, web), failover hub (sms) and
// the hub's Epochs. Build it with NewGateway, run it with Run.
type Gateway struct {
	cfg      GatewayConfig
	hub      Hub
	st       LinkStore
	bus      *Bus
	node     string
	log      *slog.Logger
	presence interface{ Down(store.Device) }

	mu        sync.Mutex
	outKicks  map[devKey]bool   // kicks to publish, true for a release; guarded by mu
	inCtls    []ctl             // controls heard, to run here; guarded by mu
	inLinks   map[string]uint64 // link signals heard for fingerprints linked here: the newest epoch; guarded by mu
	orphans   map[uint64]orphan // device id -> the dead node's link this node took over; guarded by mu
	forgot    retention.Sweep   // when orphans was last pruned, and how long they keep (gateway_forget.go); guarded by mu
	unended   map[uint64]uint64 // device id -> epoch of a link here whose end the database did not take; guarded by mu
	rechecks  map[uint64]bool   // devices left online by a dead node whose offline check this node runs; guarded by mu
	rechecked time.Time         // when the sweep last asked for those (recheckLeftOnline); guarded by mu
	out, in   chan struct{}     // wake the publisher and the runner

	sweeps chan struct{} // a sweep finished (tests)
	// broke says this node's beats broke since the last steady sweep (or
	// it just started): the next steady sweep reopens its links that
	// another node ended meanwhile (reopen).
	broke atomic.Bool
}

// NewGateway subscribes the node to the gateway's topics; Run starts it.
func NewGateway(cfg GatewayConfig) (*Gateway, error) {
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = DefaultSweepEvery
	}
	if cfg.JobLife <= 0 {
		cfg.JobLife = sms.MaxQueuedLife(sms.DefaultMessageTTL)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, hub: cfg.Hub, st: cfg.Store, bus: cfg.Bus, node: cfg.Bus.Node(), log: cfg.Logger,
		outKicks: map[devKey]bool{}, inLinks: map[string]uint64{}, orphans: map[uint64]orphan{}, unended: map[uint64]uint64{}, rechecks: map[uint64]bool{}, forgot: retention.Sweep{Life: cfg.JobLife},
		out: make(chan struct{}, 1), in: make(chan struct{}, 1), sweeps: make(chan struct{}, 1)}
	g.broke.Store(true)
	subs := map[string]func(Message){topicKick: g.heardKicks, topicLink: g.heardLink, topicCtl: g.heardCtl}
	for topic, fn := range subs {
		if err := g.bus.Subscribe(topic, fn); err != nil {
			return nil, fmt.Errorf("cluster: gateway: %w", err)
		}
	}
	return g, nil
}

// SetPresence wires the device presence that hears of the links a dead
// node left (device.Presence); call it before Run.
func (g *Gateway) SetPresence(p interface{ Down(store.Device) }) { g.presence = p }

// Run publishes and runs signals and sweeps until ctx ends.
func (g *Gateway) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { g.publishKicks(ctx) })
	wg.Go(func() { g.runHeard(ctx) })
	wg.Go(func() { g.sweepLoop(ctx) })
	wg.Wait()
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// devKey is a device as the gateway's signals name it: its fingerprint and
// id. A device deleted and the one paired again under its fingerprint are
// two devices: what is meant for one is not the other's.
type devKey struct {
	fp string
	id uint64
}

// Kick tells the node holding the device's link that new jobs wait. A
// link of the device here is kicked at once and nobody else is told: it is
// the device's only live link unless a newer one just registered
// elsewhere, which pumps on registering. A link here of another device of
// the fingerprint (one deleted whose link is not closed yet) is not the
// device's: the other nodes are told.
func (g *Gateway) Kick(fingerprint string, deviceID uint64) {
	g.kick(fingerprint, deviceID, false)
}

// Release is Kick for a release (gateway.Hub.Release): the node holding
// the device's link has it read again the agent jobs it passed over. The
// other nodes are told as for a kick, the release marked; an older node
// reads it as a kick, which releases there.
func (g *Gateway) Release(fingerprint string, deviceID uint64) {
	g.kick(fingerprint, deviceID, true)
}

// kick is Kick, or Release when release is true.
func (g *Gateway) kick(fingerprint string, deviceID uint64, release bool) {
	if g.hub.KickLinked(fingerprint, deviceID, release) {
		return
	}
	k := devKey{fingerprint, deviceID}
	g.mu.Lock()
	g.outKicks[k] = g.outKicks[k] || release
	g.mu.Unlock()
	wake(g.out)
}

// A kick message names its devices a line each: the fingerprint, then, on
// a line of its own, "/" and the device id. A node of an older version
// reads every line as a fingerprint: it kicks the fingerprints' links as it
// did, and finds no link of the id lines (no fingerprint holds a slash:
// device registration refuses one). A fingerprint line with no id line
// after it (a kick of an older node) is of whichever link holds it. A
// release (Release) adds a line "/release" after the id line: a node of
// the version before reads it as an id line that names no number and
// skips it, so it runs the release as a kick, which released there; one
// older still finds no link of it, as of the id lines.

// kick is one device of a kick message; release marks a release.
type kick struct {
	devKey
	release bool
}

// releaseLine marks the kick before it as a release.
const releaseLine = "/release"

// wireKicks is the body of a kick message of the devices.
func wireKicks(kicks []kick) []byte {
	var b strings.Builder
	for _, k := range kicks {
		b.WriteString(k.fp)
		b.WriteString("\n/")
		b.WriteString(strconv.FormatUint(k.id, 10))
		b.WriteString("\n")
		if k.release {
			b.WriteString(releaseLine + "\n")
		}
	}
	return []byte(b.String())
}

// readKicks is the devices of a kick message (wireKicks); id 0 where a
// fingerprint has no id line (an older node's).
func readKicks(data []byte) []kick {
	var out []kick
	for line := range strings.SplitSeq(string(data), "\n") {
		if line == releaseLine {
			if len(out) > 0 {
				out[len(out)-1].release = true
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "/"); ok {
			if id, err := strconv.ParseUint(rest, 10, 64); err == nil && len(out) > 0 && out[len(out)-1].id == 0 {
				out[len(out)-1].id = id
			}
			continue
		}
		if line != "" {
			out = append(out, kick{devKey: devKey{fp: line}})
		}
	}
	return out
}

// publishKicks sends the gathered kicks, at most one batch per kickCoalesce.
func (g *Gateway) publishKicks(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.out:
		}
		g.mu.Lock()
		kicks := g.outKicks
		g.outKicks = map[devKey]bool{}
		g.mu.Unlock()
		batch := make([]kick, 0, min(len(kicks), kickBatch))
		for d, release := range kicks {
			if batch = append(batch, kick{d, release}); len(batch) == kickBatch {
				g.bus.Publish(topicKick, wireKicks(batch))
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			g.bus.Publish(topicKick, wireKicks(batch))
		}
		t.Reset(kickCoalesce)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// linkedHere is d as the link here names it when that link is d's: d
// itself, or, for a signal of an older node that names the fingerprint
// alone (id 0), the device of the fingerprint's link here.
func (g *Gateway) linkedHere(d devKey) (devKey, bool) {
	if d.id == 0 {
		id, ok := g.hub.LinkDevice(d.fp)
		return devKey{d.fp, id}, ok
	}
	return d, g.hub.Online(d.fp, d.id)
}

// heardKicks kicks the devices linked here, on the bus's goroutine for
// the subscription: a kick returns at once (each link pumps on a goroutine
// of its own) and reads nothing, so it waits neither for the controls and
// link signals heard before it, which the runner may be reading the
// database for (runHeardOnce), nor in a queue behind them. Nothing relies
// on their order: the bus hands each topic's messages to a goroutine of
// its own, and a node publishes its kicks up to kickCoalesce after its
// controls. A kick of a link being closed or fenced does nothing (its
// next link reads the queue from its start); kicks of one device heard
// while its link pumps are one more pump.
func (g *Gateway) heardKicks(m Message) {
	for _, k := range readKicks(m.Data) {
		id := k.id
		if id == 0 { // an older node's kick: whichever link holds the fingerprint
			var ok bool
			if id, ok = g.hub.LinkDevice(k.fp); !ok {
				continue
			}
		}
		g.hub.KickLinked(k.fp, id, k.release)
	}
}

// heardCtl keeps a control of a device linked here (of the fingerprint's
// link here, for an older node's control, which names no device).
func (g *Gateway) heardCtl(m Message) {
	var c ctl
	if err := json.Unmarshal(m.Data, &c); err != nil || c.Fingerprint == "" {
		g.log.Warn("gateway: malformed control from another node", "err", err)
		return
	}
	if _, here := g.linkedHere(devKey{c.Fingerprint, c.Device}); !here {
		return
	}
	g.mu.Lock()
	g.inCtls = append(g.inCtls, c)
	g.mu.Unlock()
	wake(g.in)
}

// heardLink keeps a link signal of a fingerprint linked here; the runner
// fences out the link if it is its device's and older (fenceHeard).
func (g *Gateway) heardLink(m Message) {
	fp, e, ok := strings.Cut(string(m.Data), " ")
	epoch, err := strconv.ParseUint(e, 10, 64)
	if !ok || err != nil || fp == "" {
		g.log.Warn("gateway: malformed link signal from another node", "data", string(m.Data))
		return
	}
	if _, here := g.hub.LinkDevice(fp); !here {
		return
	}
	g.mu.Lock()
	g.inLinks[fp] = max(g.inLinks[fp], epoch)
	g.mu.Unlock()
	wake(g.in)
}

// fenceHeard closes with 4009 the links here that the link signals heard
// show are no longer their device's newest. A signal names the fingerprint
// and the epoch, not the device, and a device paired again under the
// fingerprint after a delete counts its epochs from 1 again: the signal of
// a link of the device deleted (one that registered as it was deleted)
// would close the new device's link here, or the other way round. So each
// link is fenced by its own device's newest epoch, read from the database
// in one query for all the signals heard, as the sweep does; when the
// database does not answer, by the signal's epoch, and only the link of the
// device that was here when the signal was heard. It says whether the
// database answered.
func (g *Gateway) fenceHeard(links map[string]uint64) bool {
	devs := make(map[string]uint64, len(links))
	ids := make([]uint64, 0, len(links))
	for fp := range links {
		if id, ok := g.hub.LinkDevice(fp); ok {
			devs[fp] = id
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return true
	}
	epochs, err := g.st.LinkEpochs(ids)
	if err != nil {
		g.log.Error("gateway: link epochs of the links signalled; fenced by the signals", "err", err)
	}
	for fp, id := range devs {
		newest := links[fp]
		if err == nil {
			newest = epochs[id]
		}
		g.hub.FenceDevice(fp, id, newest) // closes without waiting
	}
	return err == nil
}

// runHeard runs the link signals and controls other nodes sent.
func (g *Gateway) runHeard(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.in:
		}
		g.runHeardOnce()
	}
}

// runHeardOnce runs what other nodes sent since it last ran. When the
// link signals' read of the database finds it not answering, the controls
// are run as told, with no look: one pass waits one store deadline, not
// one for the read and another for the first look.
func (g *Gateway) runHeardOnce() {
	g.mu.Lock()
	links, ctls := g.inLinks, g.inCtls
	g.inLinks, g.inCtls = map[string]uint64{}, nil
	g.mu.Unlock()
	answers := true
	if len(links) > 0 {
		answers = g.fenceHeard(links)
	}
	g.runCtls(ctls, answers)
}

// runCtls runs the controls heard from other nodes on this node's links. A
// control names the device (fingerprint and id) and is of that device's
// link only; one of an older node names the fingerprint alone. One heard
// late may be of the device deleted before the fingerprint was paired again
// over it (a new token, the same device) or linked here, or older than a
// change heard first: so a disconnect closes the link only if its device
// changed as the control says (DisconnectChanged), and a settings or pace
// change gives the link its own device's settings and pace as stored now
// (Refresh), the control's own only when the store does not answer. Each
// device is looked up once for its disconnects and once for its changes,
// and once one look finds the store not answering (each waits up to the
// store's deadline), or answers says it did not (runHeardOnce), the rest of
// the controls are run as told, with no look: a burst of controls heard
// while the database hangs holds up the link signals heard after them one
// deadline, not one per link (the kicks heard wait for none of it:
// heardKicks). Neither waits for a last seen to be written: a control heard
// from another node answers no request here, and that write would hold up
// the controls and link signals heard after it.
func (g *Gateway) runCtls(ctls []ctl, answers bool) {
	looked := map[devKey]bool{}
	refresh := map[devKey][]ctl{}
	for _, c := range ctls {
		d := devKey{c.Fingerprint, c.Device}
		switch c.Op {
		case "disconnect":
			switch {
			case !answers:
				g.disconnectHere(c)
			case !looked[d]:
				looked[d] = true
				answers = g.hub.DisconnectChanged(c.Fingerprint, c.Device, c.Code, c.Reason)
			}
		case "configure", "pace":
			refresh[d] = append(refresh[d], c)
		}
	}
	for d, told := range refresh {
		if answers && g.hub.Refresh(d.fp, d.id) {
			continue
		}
		answers = false
		for _, c := range told {
			g.local(c)
		}
	}
}

// here is the device of a control heard as the link here names it
// (linkedHere); false when the link here is of another device.
func (g *Gateway) here(c ctl) (devKey, bool) {
	return g.linkedHere(devKey{c.Fingerprint, c.Device})
}

// disconnectHere runs a disconnect heard on the device's link here, if
// any, as told.
func (g *Gateway) disconnectHere(c ctl) {
	if d, ok := g.here(c); ok {
		g.hub.Disconnect(d.fp, d.id, c.Code, c.Reason)
	}
}

// local runs a settings or pace control on this node's link of the
// device, if any, as told.
func (g *Gateway) local(c ctl) {
	d, ok := g.here(c)
	if !ok {
		return
	}
	switch c.Op {
	case "configure":
		if c.Config != nil {
			g.hub.Configure(d.fp, d.id, *c.Config)
		}
	case "pace":
		g.hub.Pace(d.fp, d.id, c.PerMinute)
	}
}

// control acts on the device's link here and tells the other nodes: a
// link elsewhere, or an older one about to be fenced, gets it too.
func (g *Gateway) control(c ctl) {
	g.local(c)
	g.tell(c)
}

// tell sends the control to the other nodes.
func (g *Gateway) tell(c ctl) {
	data, err := json.Marshal(c)
	if err != nil {
		g.log.Error("gateway: encode control", "err", err)
		return
	}
	g.bus.Publish(topicCtl, data)
}

// Disconnect closes the device's link on whichever node holds it; the
// channel it returns is closed once a link here has its last seen stored
// (gateway.Hub.Disconnect). The fingerprint's link of another device is
// left open, here and elsewhere.
func (g *Gateway) Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{} {
	stored := g.hub.Disconnect(fingerprint, deviceID, code, reason)
	g.tell(ctl{Op: "disconnect", Fingerprint: fingerprint, Device: deviceID, Code: code, Reason: reason})
	return stored
}

// Configure pushes settings to the device's link on whichever node holds it.
func (g *Gateway) Configure(fingerprint string, deviceID uint64, cfg proto.Config) {
	g.control(ctl{Op: "configure", Fingerprint: fingerprint, Device: deviceID, Config: &cfg})
}

// Pace changes the device's pace on whichever node holds its link.
func (g *Gateway) Pace(fingerprint string, deviceID uint64, perMinute int) {
	g.control(ctl{Op: "pace", Fingerprint: fingerprint, Device: deviceID, PerMinute: perMinute})
}

// Claim takes the next epoch of the device's link for this node and
// fences out every older link (gateway.Epochs).
func (g *Gateway) Claim(dev store.Device) (uint64, error) {
	epoch, err := g.st.ClaimLink(dev.ID, g.node)
	if err != nil {
		return 0, fmt.Errorf("cluster: claim link of %s: %w", dev.Fingerprint, err)
	}
	g.bus.Publish(topicLink, []byte(dev.Fingerprint+" "+strconv.FormatUint(epoch, 10)))
	return epoch, nil
}

// Ended records that the device's link of epoch ended (gateway.Epochs).
func (g *Gateway) Ended(dev store.Device, epoch uint64) {
	if err := g.st.EndLink(dev.ID, epoch); err != nil {
		// The row stays open, and every node (this one too) takes the
		// device for linked here: the sweep writes the end again
		// (endAgain), until the database takes it.
		g.log.Error("gateway: end link; the sweep writes it again", "device", dev.Fingerprint, "err", err)
		g.mu.Lock()
		g.unended[dev.ID] = epoch
		g.mu.Unlock()
	}
}

// endAgain writes again the ends of links here that the database did not
// take (Ended). An end is of its epoch: a newer link of the device, here
// or elsewhere, is left open. It says whether the database answered.
func (g *Gateway) endAgain() bool {
	g.mu.Lock()
	ends := maps.Clone(g.unended)
	g.mu.Unlock()
	for id, epoch := range ends {
		if err := g.st.EndLink(id, epoch); err != nil {
			g.log.Error("gateway sweep: end a link again", "err", err)
			return false
		}
		g.mu.Lock()
		if g.unended[id] == epoch {
			delete(g.unended, id)
		}
		g.mu.Unlock()
	}
	return true
}
