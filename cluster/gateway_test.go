package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

// The failover's hold in a cluster: a device's jobs move on the node that
// holds or last held its link, or on any node when it never had one; not
// while another live node holds it, nor while a dead node's link is open;
// after this node's sweep ended that link, here, counting offline from
// then; and a device whose last link ended on a node since gone, here too.
func TestFailoverHoldAcrossNodes(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	st, g, url := gatewayOnNodes(t, live, 0, "a", "b")
	c, _ := conformance.Company(t, st)
	moves := func(fp string, id uint64) bool {
		t.Helper()
		ran := false
		if err := g.HoldDevice(fp, id, func(uint64, bool) error { ran = true; return nil }); err != nil {
			t.Fatal(err)
		}
		return ran
	}

	d := conformance.Device(t, st, c.ID, "fo-phone")
	if !moves(d.Fingerprint, d.ID) {
		t.Error("a device never linked: its jobs do not move")
	}
	if _, err := st.ClaimLink(d.ID, "b"); err != nil {
		t.Fatal(err)
	}
	if moves(d.Fingerprint, d.ID) {
		t.Error("moved while b holds the link")
	}
	// b dies: its beat ages past the live window.
	sqlExec(t, url)(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'b'`)
	if moves(d.Fingerprint, d.ID) {
		t.Error("moved while the dead node's link is open")
	}
	g.sweep()
	if g.OfflineSince(d.Fingerprint, d.ID).IsZero() {
		t.Error("the sweep ended b's link, yet the device is not offline since then")
	}
	if !moves(d.Fingerprint, d.ID) {
		t.Error("the sweep took b's link over, yet its jobs do not move here")
	}

	gone := conformance.Device(t, st, c.ID, "fo-gone")
	e, err := st.ClaimLink(gone.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EndLink(gone.ID, e); err != nil {
		t.Fatal(err)
	}
	if !moves(gone.Fingerprint, gone.ID) || g.OfflineSince(gone.Fingerprint, gone.ID).IsZero() {
		t.Error("a device last linked on a node gone is not taken over")
	}
}

// nodeBus connects the node to the bus at url, closed with the test.
func nodeBus(t *testing.T, url, node string) *Bus {
	t.Helper()
	b, err := Connect(context.Background(), Config{URL: url, Node: node})
	if err != nil {
		t.Fatalf("connect %s: %v", node, err)
	}
	t.Cleanup(b.Close)
	return b
}

// Kicks for devices linked elsewhere travel coalesced: a burst of sends
// for many devices costs the bus a few messages, and every device is in one.
func TestKicksCoalesce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	url := natstest.Start(t)
	a := nodeBus(t, url, "a")
	b := nodeBus(t, url, "b")
	var mu sync.Mutex
	messages, heard := 0, map[devKey]bool{}
	if err := b.Subscribe(topicKick, func(m Message) {
		mu.Lock()
		defer mu.Unlock()
		messages++
		for _, k := range readKicks(m.Data) {
			heard[k.devKey] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(ctx); err != nil { // the subscription is on the server
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	// A hub with no links: every device is linked elsewhere. Kicks use
	// neither the store nor the hub's services.
	hub := gateway.New(gateway.Config{}, nil, nil, log, time.Now)
	g, err := NewGateway(GatewayConfig{Bus: a, Hub: hub, Live: time.Second, SweepEvery: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	const devices, rounds = 500, 4
	for range rounds {
		for i := range devices {
			g.Kick(fmt.Sprintf("phone-%d", i), uint64(i+1))
		}
	}
	poll.Within(t, 10*time.Second, "every device's kick heard on b", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range devices {
			if !heard[devKey{fmt.Sprintf("phone-%d", i), uint64(i + 1)}] {
				return false
			}
		}
		return len(heard) == devices
	})
	mu.Lock()
	defer mu.Unlock()
	if messages >= devices {
		t.Errorf("%d kicks of %d devices took %d messages, want them coalesced", devices*rounds, devices, messages)
	}
	t.Logf("%d kicks of %d devices: %d messages", devices*rounds, devices, messages)
}

// gatewayOnNodes registers the nodes named on a new database and answers
// its store and the gateway of the first of them (its bus, hub and store),
// and the database's URL. sweep is its link sweep's period (0: the default).
func gatewayOnNodes(t *testing.T, live, sweep time.Duration, nodes ...string) (*postgres.Store, *Gateway, string) {
	t.Helper()
	return gatewayWith(t, GatewayConfig{Live: live, SweepEvery: sweep}, nodes...)
}

// sqlExec connects to the database at url for a test's own statements (a
// node's beat aged by hand, say) and returns a function that runs one,
// failing the test on an error.
func sqlExec(t *testing.T, url string) func(sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(ctx) })
	return func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// handJobs takes the queue places of jobs queued and handed to a phone,
// and answers the queue's sequence after them.
func handJobs(t *testing.T, st *postgres.Store, exec func(string, ...any), jobs int) uint64 {
	t.Helper()
	exec(`SELECT nextval('queue_places') FROM generate_series(1, $1)`, jobs)
	place, err := st.MessageSequence()
	if err != nil {
		t.Fatal(err)
	}
	return place
}

// gatewayWith is gatewayOnNodes with more of the gateway's settings (Bus,
// Store, Hub and Logger are the test's).
func gatewayWith(t *testing.T, cfg GatewayConfig, nodes ...string) (*postgres.Store, *Gateway, string) {
	t.Helper()
	live := cfg.Live
	ctx := context.Background()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, n := range nodes {
		if err := st.RegisterNode(postgres.Node{Name: n, Instance: n, Bus: true}, live); err != nil {
			t.Fatal(err)
		}
	}
	bus, err := Connect(ctx, Config{URL: natstest.Start(t), Node: nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	log := slog.New(slog.DiscardHandler)
	hub := gateway.New(gateway.Config{}, device.New(device.Config{}, st, time.Now), sms.New(sms.Config{}, st, log, time.Now), log, time.Now)
	cfg.Bus, cfg.Store, cfg.Hub, cfg.Logger = bus, st, hub, log
	g, err := NewGateway(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hub.SetEpochs(g)
	return st, g, url
}

// A device this node took over (its node died) that linked again on
// another node, which handed it jobs and is gone too, is taken over afresh:
// the failover here holds back every job queued up to its new take, and
// counts the device offline from then. Before, the first take stood: the
// jobs the later link handed to the phone moved to another member (the
// phone sent them too), at once, as the device counted offline since the
// first node's death.
func TestTakeOverAgainAfterALaterLink(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	clock := testclock.New(time.Now())
	st, g, url := gatewayWith(t, GatewayConfig{Live: live, Now: clock.Now}, "a", "b", "c", "d")
	c, _ := conformance.Company(t, st)
	exec := sqlExec(t, url)
	hand := func(jobs int) uint64 { return handJobs(t, st, exec, jobs) }
	held := func(fp string, id uint64) (upTo uint64, moves bool) {
		t.Helper()
		if err := g.HoldDevice(fp, id, func(u uint64, _ bool) error { upTo, moves = u, true; return nil }); err != nil {
			t.Fatal(err)
		}
		return upTo, moves
	}
	claim := func(id uint64, node string) uint64 {
		t.Helper()
		e, err := st.ClaimLink(id, node)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	// Killed under its link: this node's sweep takes it over.
	killed := conformance.Device(t, st, c.ID, "again-killed")
	claim(killed.ID, "b")
	first := hand(3)
	exec(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'b'`)
	g.sweep()
	// Gone after a clean end: this node's failover takes it over.
	stopped := conformance.Device(t, st, c.ID, "again-stopped")
	e := claim(stopped.ID, "b")
	if err := st.EndLink(stopped.ID, e); err != nil {
		t.Fatal(err)
	}
	if upTo, moves := held(stopped.Fingerprint, stopped.ID); !moves || upTo != first {
		t.Fatalf("taken over: moves %v up to %d, want up to %d", moves, upTo, first)
	}
	took := clock.Now()

	// Each links again: one on c, the other on d, which hand jobs to the
	// phones; then c stops (its link ended cleanly) and d is stopped
	// under its link, ended by a sweep of c before c stopped.
	clock.Advance(time.Hour)
	ec := claim(killed.ID, "c")
	claim(stopped.ID, "d")
	later := hand(5)
	if err := st.EndLink(killed.ID, ec); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'd'`)
	if devs, err := st.EndOrphanLinks(live, 10, "c"); err != nil || len(devs) != 1 {
		t.Fatalf("c's sweep ended %v (%v), want d's link", devs, err)
	}
	exec(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'c'`)
	for _, d := range []struct {
		fp string
		id uint64
	}{{killed.Fingerprint, killed.ID}, {stopped.Fingerprint, stopped.ID}} {
		if upTo, moves := held(d.fp, d.id); !moves || upTo < later {
			t.Errorf("%s taken over again: moves %v up to %d, want held up to %d (the later link handed those jobs to the phone)", d.fp, moves, upTo, later)
		}
		if since := g.OfflineSince(d.fp, d.id); !since.After(took) {
			t.Errorf("%s taken over again: offline since %v, want since the later take (after %v)", d.fp, since, took)
		}
	}
}

// endedHub is a hub whose own link of every device ended at a given time.
type endedHub struct {
	Hub
	at time.Time
}

func (h endedHub) OfflineSince(string, uint64) time.Time { return h.at }

// A device whose link ended here an hour ago, and that linked since on a
// node that died, counts offline from this node's take over, not from its
// old link here: its pool's failover_after runs from then. Before, the old
// end stood, and the failover moved its jobs at once although it had been
// linked a moment before.
func TestOfflineSinceTheLaterOfHereAndTheTake(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	clock := testclock.New(time.Now())
	st, g, url := gatewayWith(t, GatewayConfig{Live: live, Now: clock.Now}, "a", "b")
	g.hub = endedHub{Hub: g.hub, at: clock.Now().Add(-time.Hour)}
	c, _ := conformance.Company(t, st)
	d := conformance.Device(t, st, c.ID, "since-phone")
	if _, err := st.ClaimLink(d.ID, "b"); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, url)(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'b'`)
	g.sweep()
	if since := g.OfflineSince(d.Fingerprint, d.ID); !since.Equal(clock.Now()) {
		t.Errorf("offline since %v, want since the sweep took b's link over (%v)", since, clock.Now())
	}
}

// endFails is a link store whose EndLink fails while fail is set, as with
// the database gone a moment.
type endFails struct {
	LinkStore
	fail atomic.Bool
}

func (s *endFails) EndLink(deviceID, epoch uint64) error {
	if s.fail.Load() {
		return errors.New("the database did not answer")
	}
	return s.LinkStore.EndLink(deviceID, epoch)
}

// A link here whose end the database did not take is ended by the next
// sweep: before, its row stayed open while this node lived, and the device
// read online on every node, and was never reported offline, until it
// linked again.
func TestSweepEndsAgainALinkEndNotTaken(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	st, g, _ := gatewayOnNodes(t, live, 0, "a", "b")
	ends := &endFails{LinkStore: g.st}
	g.st = ends
	c, _ := conformance.Company(t, st)
	d := conformance.Device(t, st, c.ID, "again-end")
	e, err := g.Claim(d)
	if err != nil {
		t.Fatal(err)
	}
	ends.fail.Store(true)
	g.Ended(d, e)
	ends.fail.Store(false)
	if !g.Online(d.Fingerprint, d.ID) {
		t.Fatal("the end was not taken, yet the device reads offline already: the test shows nothing")
	}
	g.sweep()
	if g.Online(d.Fingerprint, d.ID) {
		t.Error("the sweep did not write the link's end again: the device reads online")
	}
	// A newer link of the device is not ended by an older end written again.
	e2, err := g.Claim(d)
	if err != nil {
		t.Fatal(err)
	}
	ends.fail.Store(true)
	g.Ended(d, e)
	ends.fail.Store(false)
	g.sweep()
	if node, ok, err := st.Linked(d.ID, live); err != nil || !ok || node != "a" {
		t.Errorf("the newer link (epoch %d): on %q open %v (%v), want open on a", e2, node, ok, err)
	}
}

// linksHub is a hub holding the links given, that records its disconnects.
type linksHub struct {
	Hub
	links []gateway.Link
	mu    sync.Mutex
	gone  map[string]string // fingerprint -> the close's code and reason
}

func (h *linksHub) Links() []gateway.Link { return h.links }

func (h *linksHub) DisconnectLink(l gateway.Link, code int, reason string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone[l.Fingerprint] = fmt.Sprint(code, " ", reason)
	done := make(chan struct{})
	close(done)
	return done
}

// A device deleted or disabled through another node whose disconnect the
// bus lost has its link here closed by the sweep (4503), as the request
// would have: before, the link stayed up until its phone dropped it.
func TestSweepClosesTheLinksOfDevicesGone(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	st, g, _ := gatewayOnNodes(t, live, 0, "a", "b")
	c, _ := conformance.Company(t, st)
	hub := &linksHub{Hub: g.hub, gone: map[string]string{}}
	for _, fp := range []string{"gone-kept", "gone-disabled", "gone-deleted"} {
		d := conformance.Device(t, st, c.ID, fp)
		e, err := g.Claim(d)
		if err != nil {
			t.Fatal(err)
		}
		hub.links = append(hub.links, gateway.Link{Fingerprint: fp, DeviceID: d.ID, Epoch: e})
	}
	g.hub = hub
	if _, err := st.UpdateDeviceWith(c.ID, hub.links[1].DeviceID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Status = store.DeviceDisabled
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteDevice(c.ID, "gone-deleted", time.Now()); err != nil {
		t.Fatal(err)
	}
	g.sweep()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	want := map[string]string{"gone-disabled": "4503 device disabled", "gone-deleted": "4503 device deleted"}
	if fmt.Sprint(hub.gone) != fmt.Sprint(want) {
		t.Errorf("the sweep closed %v, want %v", hub.gone, want)
	}
}

// A device deleted and its fingerprint paired again is a new device: what
// this node took over of the old one's links is not its. Before, the node
// kept it by fingerprint: the new device counted offline since the old
// one's take, and a link of its own on a node gone since, of the same
// epoch as the old one's taken over (a new device's epochs count from 1
// again), was not taken afresh: the failover moved the jobs that link had
// handed to the phone (the phone sent them too).
func TestPairedAgainInheritsNothingTakenOver(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	clock := testclock.New(time.Now())
	st, g, url := gatewayWith(t, GatewayConfig{Live: live, Now: clock.Now}, "a", "b", "c")
	c, _ := conformance.Company(t, st)
	exec := sqlExec(t, url)
	hand := func(jobs int) uint64 { return handJobs(t, st, exec, jobs) }
	held := func(d store.Device) (upTo uint64, moves bool) {
		t.Helper()
		if err := g.HoldDevice(d.Fingerprint, d.ID, func(u uint64, _ bool) error { upTo, moves = u, true; return nil }); err != nil {
			t.Fatal(err)
		}
		return upTo, moves
	}
	pairAgain := func(d store.Device) store.Device {
		t.Helper()
		if _, err := st.DeleteDevice(d.CompanyID, d.Fingerprint, time.Now()); err != nil {
			t.Fatal(err)
		}
		again := conformance.Device(t, st, c.ID, d.Fingerprint)
		if again.ID == d.ID {
			t.Fatal("paired again after the delete, the device kept its id: the test shows nothing")
		}
		return again
	}

	// Killed under its link on b: this node's sweep takes it over.
	killed := conformance.Device(t, st, c.ID, "inherit-killed")
	if _, err := st.ClaimLink(killed.ID, "b"); err != nil {
		t.Fatal(err)
	}
	// Gone after a clean end of its link (epoch 1) on b: this node's
	// failover takes it over.
	stopped := conformance.Device(t, st, c.ID, "inherit-stopped")
	e, err := st.ClaimLink(stopped.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EndLink(stopped.ID, e); err != nil {
		t.Fatal(err)
	}
	hand(3)
	exec(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'b'`)
	g.sweep()
	if _, moves := held(stopped); !moves {
		t.Fatal("the device last linked on b is not taken over")
	}
	for _, d := range []store.Device{killed, stopped} {
		if g.OfflineSince(d.Fingerprint, d.ID).IsZero() {
			t.Fatalf("%s taken over, yet not offline since then", d.Fingerprint)
		}
	}

	// Both fingerprints are paired again, an hour later: new devices, never
	// linked, have no end time.
	clock.Advance(time.Hour)
	killedAgain, stoppedAgain := pairAgain(killed), pairAgain(stopped)
	for _, d := range []store.Device{killedAgain, stoppedAgain} {
		if since := g.OfflineSince(d.Fingerprint, d.ID); !since.IsZero() {
			t.Errorf("%s paired again: offline since %v, the old device's take; want no end time", d.Fingerprint, since)
		}
	}

	// The new device links on c (its epoch 1, as the old one's taken
	// over), which hands it jobs, ends the link and dies: it is taken over
	// afresh, every job handed held back, offline from the new take.
	ec, err := st.ClaimLink(stoppedAgain.ID, "c")
	if err != nil {
		t.Fatal(err)
	}
	if ec != e {
		t.Fatalf("the new device's link has epoch %d, want %d as the old one's: the test shows nothing", ec, e)
	}
	later := hand(5)
	if err := st.EndLink(stoppedAgain.ID, ec); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'c'`)
	if upTo, moves := held(stoppedAgain); !moves || upTo < later {
		t.Errorf("the new device taken over: moves %v up to %d, want held up to %d (its link on c handed those jobs to the phone)", moves, upTo, later)
	}
	if since := g.OfflineSince(stoppedAgain.Fingerprint, stoppedAgain.ID); !since.Equal(clock.Now()) {
		t.Errorf("the new device taken over: offline since %v, want since its own take (%v)", since, clock.Now())
	}
}

// A company removed beside the node (simrelay admin delete-company, or an
// owner's closing on another node whose disconnects the bus lost) takes
// its devices' rows with it: the sweep closes their links here as
// deleted (4503), as it does a device deleted alone. Before, it read a
// device without a row as neither deleted nor disabled and left its link
// up, the phone linked to a company that no longer was, until it dropped
// the link itself.
func TestSweepClosesTheLinksOfARemovedCompany(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	st, g, _ := gatewayOnNodes(t, live, 0, "a", "b")
	hub := &linksHub{Hub: g.hub, gone: map[string]string{}}
	kept, _ := conformance.Company(t, st)
	removed, _ := conformance.Company(t, st)
	for _, d := range []store.Device{conformance.Device(t, st, kept.ID, "of-a-company-kept"), conformance.Device(t, st, removed.ID, "of-a-company-removed")} {
		e, err := g.Claim(d)
		if err != nil {
			t.Fatal(err)
		}
		hub.links = append(hub.links, gateway.Link{Fingerprint: d.Fingerprint, DeviceID: d.ID, Epoch: e})
	}
	g.hub = hub
	if _, err := st.MarkCompanyClosing(removed.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if r, err := account.RemoveCompany(context.Background(), st, removed.ID); err != nil || !r.Done {
		t.Fatalf("the company's removal: %+v, %v", r, err)
	}
	g.sweep()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	want := map[string]string{"of-a-company-removed": "4503 device deleted"}
	if fmt.Sprint(hub.gone) != fmt.Sprint(want) {
		t.Errorf("the sweep closed %v, want %v", hub.gone, want)
	}
}
