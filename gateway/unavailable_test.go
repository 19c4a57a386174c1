package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// A phone that links while the store's PostgreSQL database does not answer
// is told to come back (503 unavailable with Retry-After), as every route
// tells its client, not that the server failed (500): nothing is wrong with
// the phone or its token, and the operator's log names the database.
func TestLinkWhileTheDatabaseIsGoneAnswers503(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st := openStore(t, relay.URL)
	r := newRigOn(t, st, Config{}, time.Now, nil)
	token := r.pair("db-gone-1")
	relay.Cut()
	_, res, err := r.dial(token, nil)
	if err == nil || res == nil {
		t.Fatalf("linked with the database gone: %v", err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "5" || apiError(t, res) != "unavailable" {
		t.Fatalf("with the database gone: HTTP %d, Retry-After %q; want 503 unavailable with Retry-After 5", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// A fleet reconnecting through the outage is one line per 10 s, not one
	// per phone (the hub's clock is the real one: these dials take far less).
	for range 3 {
		if _, res, _ := r.dial(token, nil); res == nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("another link with the database gone: %v, want 503", res)
		}
	}
	if n := strings.Count(r.logs.String(), `msg="device authentication failed`); n != 1 {
		t.Fatalf("4 links refused within 10 s logged %d lines, want 1:\n%s", n, r.logs.String())
	}
}

// countedAuth is the device service counting the hub's token checks, the
// store reads of its upgrades.
type countedAuth struct {
	*device.Service
	n *atomic.Int64
}

func (c countedAuth) Authenticate(ctx context.Context, token string) (store.Device, error) {
	c.n.Add(1)
	return c.Service.Authenticate(ctx, token)
}

// relayedRig is a hub over PostgreSQL through a relay the test can cut,
// with the hub's clock moved by hand (advance) and its token checks
// counted.
func relayedRig(t *testing.T) (r *rig, relay *pgtest.Relayed, advance func(time.Duration), checks *atomic.Int64) {
	t.Helper()
	relay = pgtest.Relay(t, pgtest.URL(t))
	st := openStore(t, relay.URL)
	var offset atomic.Int64
	hubNow := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	checks = new(atomic.Int64)
	r = newRigHub(t, st, Config{}, time.Now, nil, hubSetup{now: hubNow, devices: func(d *device.Service) Devices { return countedAuth{d, checks} }})
	return r, relay, func(d time.Duration) { offset.Add(int64(d)) }, checks
}

// Once an upgrade found the database out of reach, the hub knows it: the
// upgrades that follow are answered 503 from memory, without a store read
// each (a fleet reconnecting through an outage would otherwise cost the
// database a connection attempt per phone, and on a network that drops
// packets hold each for the connect timeout), but for one probe a second;
// the first probe that finds the database back lets every phone in again.
func TestUpgradesWhileTheDatabaseIsGoneSpareIt(t *testing.T) {
	t.Parallel()
	r, relay, advance, checks := relayedRig(t)
	token := r.pair("db-gate-1")
	refused := func(when string) {
		t.Helper()
		_, res, err := r.dial(token, nil)
		if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "5" || apiError(t, res) != "unavailable" {
			t.Fatalf("%s: %v %v, want 503 unavailable with Retry-After 5", when, res, err)
		}
	}
	relay.Cut()
	refused("the first link with the database gone")
	if n := checks.Load(); n != 1 {
		t.Fatalf("the first link with the database gone read the token %d times, want once", n)
	}
	for range 5 {
		refused("a link right after")
	}
	if n := checks.Load(); n != 1 {
		t.Fatalf("5 more links within the second read the token %d more times, want none", n-1)
	}
	advance(probeEvery)
	refused("the probe a second later")
	refused("a link right after the probe")
	if n := checks.Load(); n != 2 {
		t.Fatalf("the probe and a link after it read the token %d more times, want 1 (the probe)", n-1)
	}
	relay.Resume()
	refused("a link before the next probe, with the database back")
	advance(probeEvery)
	if ws, _, err := r.dial(token, nil); err != nil {
		t.Fatalf("the probe with the database back: %v, want the link", err)
	} else {
		ws.CloseNow()
	}
	if ws, _, err := r.dial(token, nil); err != nil {
		t.Fatalf("a link after the probe found the database back: %v, want the link", err)
	} else {
		ws.CloseNow()
	}
	if n := checks.Load(); n != 4 {
		t.Fatalf("token reads: %d, want 4 (2 probes, then each link)", n)
	}
}

// heldAuth is the device service whose token checks wait for release
// once held, counted as they start.
type heldAuth struct {
	*device.Service
	n       *atomic.Int64
	held    *atomic.Bool
	release chan struct{}
}

func (h heldAuth) Authenticate(ctx context.Context, token string) (store.Device, error) {
	h.n.Add(1)
	if h.held.Load() {
		<-h.release
	}
	return h.Service.Authenticate(ctx, token)
}

// An upgrade with no device token (none, or another kind of credential)
// asks the store nothing, so it is no probe: while the database is out of
// reach it neither opens the gate, letting the whole fleet ask the store
// again, nor takes the probe's turn from a phone.
func TestUpgradeWithoutTokenIsNoProbe(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st := openStore(t, relay.URL)
	var offset atomic.Int64
	hubNow := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	auth := heldAuth{n: new(atomic.Int64), held: new(atomic.Bool), release: make(chan struct{})}
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{now: hubNow, devices: func(d *device.Service) Devices { auth.Service = d; return auth }})
	token := r.pair("db-notoken-1")
	t.Cleanup(func() { close(auth.release) })

	relay.Cut()
	if _, res, _ := r.dial(token, nil); res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the first link with the database gone: %v, want 503", res)
	}
	offset.Add(int64(probeEvery))
	for _, bad := range []string{"", "not-a-device-token"} {
		_, res, err := r.dial(bad, nil)
		if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized || apiError(t, res) != "unauthorized" {
			t.Fatalf("token %q with the database gone: %v %v, want 401 unauthorized", bad, res, err)
		}
	}
	if n := auth.n.Load(); n != 1 {
		t.Fatalf("the store was asked %d times, want once (the first link)", n)
	}
	// The probe's turn is still the next phone's; it waits on the store,
	// and the phone after it is refused from memory meanwhile.
	auth.held.Store(true)
	probe := make(chan *http.Response, 1)
	go func() {
		_, res, _ := r.dial(token, nil)
		probe <- res
	}()
	eventually(t, "the probe asking the store", func() bool { return auth.n.Load() == 2 })
	after := make(chan *http.Response, 1)
	go func() {
		_, res, _ := r.dial(token, nil)
		after <- res
	}()
	select {
	case res := <-after:
		if res == nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a link while the probe asks the store: %v, want 503", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a link while the probe asks the store was not refused from memory: it asked the store too (%d checks)", auth.n.Load())
	}
	auth.held.Store(false)
	auth.release <- struct{}{}
	if res := <-probe; res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the probe with the database gone: %v, want 503", res)
	}
}

// The end to end of a database outage, with the reference client's own
// backoff: a phone linked when PostgreSQL goes away has its link closed
// with 1013 as it reports (not 1011: nothing failed in the server), its
// upgrades are refused with 503 unavailable, and after each refusal it
// waits 1 to 15 units (BackoffBase), never more however long the outage,
// so it links again within that of the database's return; the report it
// kept is stored then.
func TestPhoneBackWithinSecondsOfTheDatabase(t *testing.T) {
	t.Parallel()
	r, relay, _, _ := relayedRig(t)
	token := r.pair("db-back-1")
	const base = 10 * time.Millisecond
	type retry struct {
		err  error
		wait time.Duration
	}
	var mu sync.Mutex
	var retries []retry
	ups := make(chan struct{}, 64)
	p := client.New(client.Config{WSURL: r.url, Token: token, BackoffBase: base,
		Hello: proto.Hello{AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}},
		OnState: func(up bool, _ error) {
			if up {
				ups <- struct{}{}
			}
		},
		OnRetry: func(err error, wait time.Duration) {
			mu.Lock()
			retries = append(retries, retry{err, wait})
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	defer func() {
		cancel()
		<-ran
	}()
	linked := func(when string) {
		t.Helper()
		select {
		case <-ups:
		case err := <-ran:
			t.Fatalf("%s: the phone stopped: %v", when, err)
		case <-time.After(20 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%s: not linked in 20 s; retries: %v\n%s", when, retries, r.logs.String())
		}
	}
	linked("before the outage")

	relay.Cut()
	ack := p.Receive(proto.Inbound{ClientID: "c-outage", From: "+15550100000", Message: "sent during the outage"})
	// Enough refusals for the backoff of old to have grown past its first
	// waits: 1013, then a run of 503s.
	const refusals = 12
	eventually(t, "the phone refused 12 times", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(retries) >= refusals
	})
	relay.Resume()
	linked("after the database came back")
	select {
	case a := <-ack:
		if a.ClientID != "c-outage" || a.ID == 0 {
			t.Fatalf("inbound ack %+v, want the message stored", a)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the inbound kept through the outage was not stored once the phone linked again")
	}

	mu.Lock()
	defer mu.Unlock()
	var ce websocket.CloseError
	if !errors.As(retries[0].err, &ce) || ce.Code != proto.CloseTryAgainLater {
		t.Fatalf("the link that reported with the database gone ended with %v, want close 1013\n%s", retries[0].err, r.logs.String())
	}
	for i, rt := range retries {
		var apiErr *client.APIError
		if i > 0 && !(errors.As(rt.err, &apiErr) && apiErr.Status == http.StatusServiceUnavailable && apiErr.Code == "unavailable") && !errors.As(rt.err, &ce) {
			t.Fatalf("refusal %d: %v, want 503 unavailable (or close 1013)", i+1, rt.err)
		}
		if !client.TryAgainSoon(rt.err) || rt.wait < base || rt.wait > client.SoonUnits*base {
			t.Fatalf("refusal %d (%v): waited %s, want %s to %s", i+1, rt.err, rt.wait, base, client.SoonUnits*base)
		}
	}
	if strings.Contains(r.logs.String(), "code=1011") {
		t.Fatalf("a link was closed with 1011 for the database's outage:\n%s", r.logs.String())
	}
}

// linksIn claims links in the database of st, as a node of a cluster
// records them (cluster.Gateway, without the bus that tells other nodes).
type linksIn struct{ st *postgres.Store }

func (l linksIn) Claim(dev store.Device) (uint64, error) { return l.st.ClaimLink(dev.ID, "node-a") }
func (l linksIn) Ended(store.Device, uint64)             {}

// On a node of a cluster a link is recorded in the database once its hello
// is stored; a database out of reach there closes the link with 1013 (as
// it does the hello), not with 4012: the server is not restarting. The
// record is made through a connection of its own here, cut while the
// hello's store still answers.
func TestClaimWhileTheDatabaseIsGoneCloses1013(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	db := pgtest.URL(t)
	st := openStore(t, db)
	relay := pgtest.Relay(t, db)
	links := openStore(t, relay.URL)
	var offset atomic.Int64
	hubNow := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{now: hubNow, epochs: linksIn{links}})
	token := r.pair("db-claim-1")
	relay.Cut()
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if code := closeCode(t, ws); code != proto.CloseTryAgainLater {
		t.Fatalf("a link whose record the database could not take closed with %d, want 1013\n%s", code, r.logs.String())
	}
	// The hub took the link's record for its database out of reach: it
	// refuses upgrades from memory until its probe a second later.
	relay.Resume()
	offset.Add(int64(probeEvery))
	r.connect(token)
}

// A phone whose upgrade passed just before the database went away has its
// hello refused with 1013, not 1011: its phone comes back within seconds.
func TestHelloWhileTheDatabaseIsGoneCloses1013(t *testing.T) {
	t.Parallel()
	r, relay, _, _ := relayedRig(t)
	token := r.pair("db-hello-1")
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	relay.Cut()
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if code := closeCode(t, ws); code != proto.CloseTryAgainLater {
		t.Fatalf("a hello with the database gone closed with %d, want 1013\n%s", code, r.logs.String())
	}
	if !strings.Contains(r.logs.String(), `msg="store hello: the database does not answer"`) {
		t.Fatalf("the hub's log does not say why:\n%s", r.logs.String())
	}
}

// A link whose queue the hub could not read, its database out of reach, is
// closed with 1013, as at any other store fault of a link: left up, nothing
// would read the queue again before the next send or ack, and a job queued
// before the outage would wait on a live link after the database came
// back. Here a job waits on the device's pace (one a minute) when the
// database goes away, and a kick reads the queue first (a pace or gap
// timer, or another node's send over the bus, alike); the phone's next
// link gets the job.
func TestQueueUnreadWhileTheDatabaseIsGoneCloses1013(t *testing.T) {
	t.Parallel()
	r, relay, advance, _ := relayedRig(t)
	token := r.pair("db-queue-1")
	one := 1
	if _, err := r.devices.Update(context.Background(), r.company, "db-queue-1", device.Patch{SMSPerMinute: &one}); err != nil {
		t.Fatal(err)
	}
	ws := r.connect(token)
	for _, m := range []string{"before the outage", "queued before the outage"} {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "db-queue-1", Phone: "+15551234567", Message: m}, nil); err != nil {
			t.Fatal(err)
		}
	}
	first, ok := readFrame(t, ws).(*proto.Send)
	if !ok || first.Message != "before the outage" {
		t.Fatalf("got %#v, want the first job at once", first)
	}
	writeFrame(t, ws, proto.Ack{ID: first.ID})
	// Answers keep the frames' order: the ack is stored once the probe's
	// answer comes.
	writeFrame(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readFrame(t, ws).(*proto.InboundAck); !ok {
		t.Fatalf("got %#v, want the probe's answer (the second job waits for its pace)", f)
	}

	relay.Cut()
	kickClosesTryAgain(t, r, ws, "db-queue-1", "load pending jobs")

	// The link's end could not store its last seen time either, which
	// keeps the hub's gate closed for a second from then.
	eventually(t, "the link's end", func() bool {
		return strings.Contains(r.logs.String(), `msg="store last seen: the database does not answer"`)
	})
	relay.Resume()
	// The pace is the device's and outlives the link (the job would wait
	// out its minute on the next one too): lifted, the next link gets the
	// job at once.
	none := 0
	if _, err := r.devices.Update(context.Background(), r.company, "db-queue-1", device.Patch{SMSPerMinute: &none}); err != nil {
		t.Fatal(err)
	}
	advance(probeEvery) // the hub's next upgrade asks the database again
	ws = r.connect(token)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "queued before the outage" {
		t.Fatalf("got %#v on the next link, want the job queued before the outage", s)
	}
}

// seenCounted is countedAuth counting the links' writes of their last seen
// time too.
type seenCounted struct {
	countedAuth
	seen *atomic.Int64
}

func (c seenCounted) Seen(ctx context.Context, dev store.Device, at time.Time) error {
	defer c.seen.Add(1)
	return c.Service.Seen(ctx, dev, at)
}

// Every link that ends while the database is out of reach fails to store
// its last seen time: one line per 10 s says so, with how many were left
// out, not one per link (10,000 for as many phones). The hub then knows the
// database out of reach: the upgrades that follow are refused from memory.
func TestLinksEndingWhileTheDatabaseIsGoneLogOnce(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st := openStore(t, relay.URL)
	checks, seen := new(atomic.Int64), new(atomic.Int64)
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{devices: func(d *device.Service) Devices { return seenCounted{countedAuth{d, checks}, seen} }})
	const links = 3
	var tokens []string
	var phones []*websocket.Conn
	for i := range links {
		token := r.pair(fmt.Sprintf("db-seen-%d", i))
		tokens = append(tokens, token)
		ws := r.connect(token)
		// The link reads frames once its hello has read the queue: the
		// answer to a frame of an unknown type (no store call) says so, and
		// nothing but the links' ends asks the database once it is gone.
		writeRaw(t, ws, []byte(`{"type":"no_such_frame"}`))
		if f, ok := readFrame(t, ws).(*proto.Error); !ok || f.Code != "unknown_frame" {
			t.Fatalf("got %#v, want unknown_frame", f)
		}
		phones = append(phones, ws)
	}
	relay.Cut()
	for _, ws := range phones {
		ws.CloseNow()
	}
	// The hub's shutdown returns once each link has ended, its last seen
	// time tried.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := seen.Load(); n != links {
		t.Fatalf("%d links ended, %d last seen times tried; want %d", links, n, links)
	}
	logs := r.logs.String()
	if n := strings.Count(logs, `msg="store last seen`); n != 1 || !strings.Contains(logs, `msg="store last seen: the database does not answer"`) {
		t.Fatalf("%d links ended with the database gone logged %d lines of their last seen time, want 1 that names the database:\n%s", links, n, logs)
	}
	before := checks.Load()
	if _, res, err := r.dial(tokens[0], nil); err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a link after the others ended with the database gone: %v %v, want 503", res, err)
	}
	if n := checks.Load() - before; n != 0 {
		t.Fatalf("a link after the last seen times failed read the token %d times, want none (refused from memory)", n)
	}
}

// A link whose WhatsApp queue the hub could not read, its database out of
// reach, is closed with 1013 as when its SMS queue cannot be read: left
// up, the number's jobs would wait for the next send or ack. WhatsApp is
// reached through a connection of its own here, cut while the SMS queue
// still answers.
func TestAgentQueueUnreadWhileTheDatabaseIsGoneCloses1013(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	db := pgtest.URL(t)
	st := openStore(t, db)
	relay := pgtest.Relay(t, db)
	through := openStore(t, relay.URL)
	var agents *channel.Service
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{wire: func(h *Hub, log *slog.Logger) {
		var err error
		agents, err = channel.New(channel.Config{}, through, log, time.Now, rand.NewPCG(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		agents.SetDispatcher(h)
		h.SetAgents(agents)
	}})
	token := r.pair("db-agent-1")
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}},
		WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550101111"}}})
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", w)
	}
	numbers, err := agents.Numbers(context.Background(), r.company, channel.WhatsApp)
	if err != nil || len(numbers) != 1 {
		t.Fatalf("numbers after the hello: %v, %v; want the one announced", numbers, err)
	}
	if _, _, err := agents.Send(context.Background(), channel.SendInput{CompanyID: r.company, Channel: channel.WhatsApp,
		NumberID: numbers[0].PublicID, To: "+15551234567", Content: "before the outage"}, nil); err != nil {
		t.Fatal(err)
	}
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Channel != proto.ChannelWhatsApp {
		t.Fatalf("got %#v, want the WhatsApp job", s)
	}

	relay.Cut()
	kickClosesTryAgain(t, r, ws, "db-agent-1", "load pending agent jobs")
}

// kickClosesTryAgain kicks the device's link, its database cut, and
// checks the link closes with 1013 and the hub's log names what failed.
func kickClosesTryAgain(t *testing.T, r *rig, ws *websocket.Conn, fingerprint, what string) {
	t.Helper()
	r.hub.Kick(fingerprint, r.id(fingerprint))
	if code := closeCode(t, ws); code != proto.CloseTryAgainLater {
		t.Fatalf("a link whose queue could not be read (%s) closed with %d, want 1013\n%s", what, code, r.logs.String())
	}
	if !strings.Contains(r.logs.String(), `msg="`+what+`: the database does not answer"`) {
		t.Fatalf("the hub's log does not say why:\n%s", r.logs.String())
	}
}

// openStore opens the PostgreSQL store at url, through its own pool,
// closed when the test ends.
func openStore(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// A settings control that found the database out of reach closes the gate
// as an upgrade's failure does, and opens it again the same way: once the
// database answers, the next control after probeEvery reads it (the
// device's settings as stored) and tells the phone. It stayed closed until
// a phone linked again: with every phone still linked, each control was
// applied as told without the read that orders it after changes made
// meanwhile, for as long as the node ran.
func TestSettingsReadReopensTheGate(t *testing.T) {
	t.Parallel()
	r, relay, advance, _ := relayedRig(t)
	ws := r.connect(r.pair("gate-1"))
	id := r.id("gate-1")
	// The link reads frames once its hello has read the queue: from then
	// on it makes no store call of its own for the cut to close it on.
	writeRaw(t, ws, []byte(`{"type":"no_such_frame"}`))
	if f, ok := readFrame(t, ws).(*proto.Error); !ok || f.Code != "unknown_frame" {
		t.Fatalf("got %#v, want unknown_frame", f)
	}
	relay.Cut()
	if r.hub.Refresh("gate-1", id) {
		t.Fatal("a settings control with the database gone said it read the device")
	}
	relay.Resume()
	if r.hub.Refresh("gate-1", id) {
		t.Fatal("a settings control within a second of the failure read the database, want it spared")
	}
	// The pool's connections from before the cut fail one read each (a
	// probe each) before a new one answers.
	read := false
	for range 10 {
		advance(2 * probeEvery)
		if read = r.hub.Refresh("gate-1", id); read {
			break
		}
	}
	if !read {
		t.Fatalf("no settings control with the database back read the device, 10 probes\n%s", r.logs.String())
	}
	if c, ok := readFrame(t, ws).(*proto.Config); !ok || c.DeviceName == "" {
		t.Fatalf("got %#v, want the stored settings", c)
	}
	if r.hub.gate.outage() != nil {
		t.Fatal("the gate stays closed after the database answered a settings read")
	}
}

// outage is the error that closed the gate while the store is known to be
// out of reach; nil otherwise.
func (g *storeGate) outage() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		return nil
	}
	return g.err
}

// kickRig links phones named fps, each past its hello (reading frames), on
// a hub whose store is reached through relay; ids are the devices' ids.
func kickRig(t *testing.T, fps ...string) (r *rig, relay *pgtest.Relayed, advance func(time.Duration), links []*websocket.Conn, ids []uint64) {
	t.Helper()
	r, relay, advance, _ = relayedRig(t)
	for _, fp := range fps {
		ws := r.connect(r.pair(fp))
		// The link reads frames once its hello has read the queue.
		writeRaw(t, ws, []byte(`{"type":"no_such_frame"}`))
		if f, ok := readFrame(t, ws).(*proto.Error); !ok || f.Code != "unknown_frame" {
			t.Fatalf("got %#v, want unknown_frame", f)
		}
		links, ids = append(links, ws), append(ids, r.id(fp))
	}
	return r, relay, advance, links, ids
}

// probeNames are the phones a test kicks one after another until one's read
// answers: the pool's connections from before a cut fail one read each (its
// link closed) before a new one answers.
var probeNames = []string{"probe-0", "probe-1", "probe-2", "probe-3", "probe-4", "probe-5", "probe-6", "probe-7", "probe-8", "probe-9"}

// kickUntilOpen kicks the probes (links[first:], named probeNames) one
// after another, advancing the hub's clock by step before each, until the
// gate opens; it fails t unless it does, and unless the link whose read
// opened it is still up.
func kickUntilOpen(t *testing.T, r *rig, advance func(time.Duration), step time.Duration, links []*websocket.Conn, ids []uint64, first int) {
	t.Helper()
	for i := range probeNames {
		advance(step)
		reads := r.reads.Load()
		r.hub.Kick(probeNames[i], ids[first+i])
		kicksPumped(t, r.hub, probeNames[i])
		if r.reads.Load() == reads {
			t.Fatalf("probe %d's kick read no queue, want a read", i)
		}
		if r.hub.gate.outage() == nil {
			writeRaw(t, links[first+i], []byte(`{"type":"no_such_frame"}`))
			if f, ok := readFrame(t, links[first+i]).(*proto.Error); !ok || f.Code != "unknown_frame" {
				t.Fatalf("got %#v, want the link whose kick found the database back still up", f)
			}
			return
		}
	}
	t.Fatalf("no kick's read reopened the gate, %d probes\n%s", len(probeNames), r.logs.String())
}

// A kick once the hub has known its database out of reach for pumpGrace
// closes the link with 1013 from memory, as an upgrade is refused then,
// instead of a queue read that would wait out the store's deadline on a
// database that stopped answering: a cluster's node that lost its database
// while the others commit and kick its phones held each kick 30 s, one
// after another. A pump's read, once a second, is the probe that opens the
// gate again.
func TestKickWhileTheDatabaseIsGoneSparesIt(t *testing.T) {
	t.Parallel()
	r, relay, advance, links, ids := kickRig(t, append([]string{"kick-gate-a", "kick-gate-a2", "kick-gate-b"}, probeNames...)...)
	relay.Cut()
	r.hub.Kick("kick-gate-a", ids[0]) // its read fails: the hub knows the database gone
	if code := closeCode(t, links[0]); code != proto.CloseTryAgainLater {
		t.Fatalf("a kick with the database cut closed its link with %d, want 1013", code)
	}
	// pumpGrace later the next kick's read is the probe, and fails again.
	advance(pumpGrace)
	r.hub.Kick("kick-gate-a2", ids[1])
	if code := closeCode(t, links[1]); code != proto.CloseTryAgainLater {
		t.Fatalf("the probe's kick with the database cut closed its link with %d, want 1013", code)
	}
	// Before the next probe's turn, a kick reads nothing: a read would wait
	// out the store's deadline on a database that stopped answering
	// without refusing (30 s).
	reads := r.reads.Load()
	r.hub.Kick("kick-gate-b", ids[2])
	if code := closeCode(t, links[2]); code != proto.CloseTryAgainLater {
		t.Fatalf("a kick while the database is known gone closed its link with %d, want 1013", code)
	}
	if n := r.reads.Load() - reads; n != 0 {
		t.Fatalf("a kick between probes of a known outage read the queue %d times, want none", n)
	}
	// A probe's read a second later finds the database back: the link
	// stays, and the gate opens.
	relay.Resume()
	kickUntilOpen(t, r, advance, 2*probeEvery, links, ids, 3)
}

// One failure is not yet an outage for the links: within pumpGrace of it
// their pumps read the store as usual, and the first read that answers
// opens the gate again, its link up. Closing every link kicked in that
// second (a busy node's hundreds) for one slow transaction or one broken
// connection of the pool would send their phones away for nothing.
func TestKickSoonAfterOneFailureReadsAndReopens(t *testing.T) {
	t.Parallel()
	r, relay, advance, links, ids := kickRig(t, append([]string{"kick-once-a"}, probeNames...)...)
	relay.Cut()
	r.hub.Kick("kick-once-a", ids[0])
	if code := closeCode(t, links[0]); code != proto.CloseTryAgainLater {
		t.Fatalf("a kick with the database cut closed its link with %d, want 1013", code)
	}
	relay.Resume()
	kickUntilOpen(t, r, advance, 0, links, ids, 1)
}
