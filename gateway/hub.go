package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/logspacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Defaults, and why.
const (
	DefaultHelloTimeout = 10 * time.Second // the contract's hello deadline
	// DefaultPingInterval keeps NAT mappings of mobile carriers (often 60-120 s) alive.
	DefaultPingInterval = 45 * time.Second
	// DefaultPongTimeout with the ping interval makes a silent phone offline after about 90 s.
	DefaultPongTimeout  = 45 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultQueueLen bounds frames waiting for one phone; a phone that lets
	// this many pile up is too slow and is closed (4008).
	DefaultQueueLen = 64
	// DefaultQueueBytes bounds the same queue in bytes, so that what a phone
	// that never reads can make the server hold is known: a few frames near
	// the 64 KiB frame limit would otherwise fill memory long before the
	// frame count. 256 KiB holds the 64 frames of ordinary traffic (sends
	// of a long SMS are about 7 KB) with room to spare.
	DefaultQueueBytes = 256 << 10
	// DefaultMaxInflight is the contract's window of un-acked sends per link.
	DefaultMaxInflight = 16
	// DefaultFrameRate and DefaultFrameBurst bound what one phone sends
	// unasked (inbound, unknown frames, reports that answer nothing); a burst
	// of inbound SMS after a reconnect fits easily. Answers to the server's
	// own sends are not counted: they are bounded by what it sent.
	DefaultFrameRate  = 50
	DefaultFrameBurst = 200
)

// Config tunes the hub.
type Config struct {
	HelloTimeout time.Duration
	PingInterval time.Duration
	PongTimeout  time.Duration
	WriteTimeout time.Duration
	QueueLen     int
	QueueBytes   int // bytes of frames waiting for one phone; one frame always fits an empty queue
	MaxInflight  int
	FrameRate    float64 // unasked frames per second a phone may send on average
	FrameBurst   int
	// JobLife is the longest a job handed to a phone may stay queued
	// (sms.MaxQueuedLife): how long the hub remembers a device's links
	// after they end (forget.go).
	JobLife time.Duration
}

func (c *Config) defaults() {
	orDefault(&c.HelloTimeout, DefaultHelloTimeout)
	orDefault(&c.PingInterval, DefaultPingInterval)
	orDefault(&c.PongTimeout, DefaultPongTimeout)
	orDefault(&c.WriteTimeout, DefaultWriteTimeout)
	orDefault(&c.QueueLen, DefaultQueueLen)
	orDefault(&c.QueueBytes, DefaultQueueBytes)
	orDefault(&c.MaxInflight, DefaultMaxInflight)
	orDefault(&c.FrameRate, DefaultFrameRate)
	orDefault(&c.FrameBurst, DefaultFrameBurst)
	orDefault(&c.JobLife, sms.MaxQueuedLife(sms.DefaultMessageTTL))
}

// orDefault replaces a zero or negative setting with its default.
func orDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Devices is the device service as the hub uses it.
type Devices interface {
	Authenticate(ctx context.Context, token string) (store.Device, error)
	Get(ctx context.Context, companyID uint64, fingerprint string) (store.Device, error)
	// Hello and Seen act on the registration the link authenticated as
	// (company and device id), never on a later one of the same fingerprint.
	Hello(ctx context.Context, dev store.Device, selectedSIM string, sims []store.SIM, appVersion string, health *proto.Health) (store.Device, error)
	Seen(ctx context.Context, dev store.Device, at time.Time) error
	// Health stores a health frame as the device's last report; a report
	// too soon after the last is a problem with a RetryAfter.
	Health(ctx context.Context, dev store.Device, h proto.Health) error
}

// Intake takes what phones report. Ack and Status queue their store write
// and return at once; the report's Wait returns once it is durable, and the
// hub acknowledges to the phone only then. Reports of one link are applied
// in the order it queued them. Inbound returns once the message is durable.
type Intake interface {
	// Ack records that the phone took the job with this id. The report's
	// moved says the job's stored status changed: news a job gives at most
	// once per step, which is what lets the hub leave it out of the flood
	// count without a read of its own.
	Ack(ctx context.Context, dev store.Device, id string) sms.Report
	// Status records an outcome the phone reported; moved as for Ack.
	Status(ctx context.Context, dev store.Device, s proto.Status) sms.Report
	// Inbound stores a message the phone received, once per client_id.
	Inbound(ctx context.Context, dev store.Device, in proto.Inbound) (proto.InboundAck, error)
	// Pending returns up to limit jobs waiting for the device after the one
	// with seq after, oldest first.
	Pending(ctx context.Context, dev store.Device, after uint64, limit int) ([]sms.Job, error)
}

// Presence is told when a device's link is registered and when its
// registered link ends, or a link whose hello was stored is refused after
// all (device.Presence turns that into device.online and device.offline). Up runs on the link's set-up goroutine, Down on its
// reader as it ends; neither may block for long.
type Presence interface {
	Up(dev store.Device)
	Down(dev store.Device)
}

// SetPresence wires the presence hook; call it before serving.
func (h *Hub) SetPresence(p Presence) { h.presence = p }

// Hub holds the phones' links.
type Hub struct {
	cfg      Config
	devices  Devices
	intake   Intake
	agents   Agents   // nil: no WhatsApp or iMessage (agents.go); set before serving
	presence Presence // nil: nobody is told of links coming and going; set before serving
	epochs   Epochs   // nil: one node; the cluster's fencing of links (links.go); set before serving
	log      *slog.Logger
	now      func() time.Time
	pings    *pinger
	// unavailable spaces the lines of links refused while the database
	// does not answer (ServeHTTP).
	unavailable logspacing.Spacer

	mu       sync.Mutex
	conns    map[string]*conn   // registered links by fingerprint; guarded by mu
	links    map[*conn]struct{} // every link, in hello or registered; guarded by mu
	draining bool               // guarded by mu
	// dispatched is, per device id, the highest queue place written to any
	// of its links since the hub started; holds are the devices whose
	// queued jobs a failover is moving (HoldDevice); endedAt is when each
	// device's last link ended; forgotAt is when the last two were last
	// pruned (forget.go). All guarded by mu.
	dispatched map[uint64]dispatchMark
	holds      map[string]chan struct{}
	endedAt    map[string]time.Time
	forgotAt   time.Time

	wg sync.WaitGroup // every goroutine of every link
}

// New returns a hub.
func New(cfg Config, devices Devices, intake Intake, log *slog.Logger, now func() time.Time) *Hub {
	cfg.defaults()
	return &Hub{cfg: cfg, devices: devices, intake: intake, log: log, now: now, pings: newPinger(cfg.PingInterval), conns: map[string]*conn{}, links: map[*conn]struct{}{},
		dispatched: map[uint64]dispatchMark{}, holds: map[string]chan struct{}{}, endedAt: map[string]time.Time{}}
}

// unavailableLogEvery spaces the log lines of links refused while the
// database does not answer, as the API spaces those of its requests: a
// fleet of phones reconnecting through an outage is thousands of refusals.
const unavailableLogEvery = 10 * time.Second

// ServeHTTP is GET /device/ws: check the device token, upgrade, and hand the
// link to its own goroutines. The handler goroutine returns at once, so its
// (large) stack does not stay pinned for the days a phone stays connected.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		token = "" // no scheme, or another one: no credential
	}
	token = strings.TrimSpace(token)
	dev, err := h.devices.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusUnauthorized, "unauthorized", "The device token is missing, invalid or revoked. Pair the phone again.")
		return
	case errors.Is(err, store.ErrUnavailable):
		// PostgreSQL out of reach: the phone is told to come back, as any
		// route tells its client, not that the server failed.
		// Every phone reconnecting meets it: one line per unavailableLogEvery
		// says so, with how many were left out, not one line per phone.
		if suppressed, ok := h.unavailable.Due(h.now(), unavailableLogEvery); ok {
			h.log.Error("device authentication failed: the database does not answer", "err", err, "suppressed", suppressed)
		}
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "The server cannot reach its database; connect again shortly.")
		return
	case err != nil:
		h.log.Error("device authentication failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "The server failed to check the device token; it has been logged.")
		return
	case dev.Status == store.DeviceDisabled:
		writeError(w, http.StatusForbidden, "device_disabled", "This device is disabled. Set its status to active (PATCH /device/{device_fingerprint}) to connect it again.")
		return
	}
	if h.isDraining() {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "The server is restarting; connect again shortly.")
		return
	}
	// Phones are not browsers and authenticate with a bearer token, never a
	// cookie, so cross-origin checks protect nothing here.
	sw := smallBuffers(w)
	var c *conn // set before its reader starts, the only goroutine that reads pongs
	ws, err := websocket.Accept(sw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true,
		// The reader takes pongs between frames (awaitFrame); one that comes
		// while the library is reading a frame is the library's to read, and
		// answers the link's ping all the same.
		OnPongReceived: func(context.Context, []byte) { c.ponged() },
		// The phone's own pings are answered only within their bound
		// (flood.go): each costs the server a pong written.
		OnPingReceived: func(context.Context, []byte) bool { return c.pinged() },
	})
	if err != nil {
		return // Accept has answered the client
	}
	ws.SetReadLimit(proto.MaxFrameBytes)
	c = newConn(h, ws, hijacked(sw), dev, token)
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		ws.Close(proto.CloseRestarting, "server restarting")
		return
	}
	h.links[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	go c.run()
}

func (h *Hub) isDraining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}

func (h *Hub) forget(c *conn) {
	h.mu.Lock()
	delete(h.links, c)
	h.mu.Unlock()
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}

// register makes c the device's link, returning the link it replaces.
func (h *Hub) register(c *conn) (old *conn, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for hold := h.holds[c.dev.Fingerprint]; hold != nil; hold = h.holds[c.dev.Fingerprint] {
		// A failover is moving the device's queued jobs: the new link
		// reads its queue once they are gone.
		h.mu.Unlock()
		<-hold
		h.mu.Lock()
	}
	if h.draining || c.closed() {
		return nil, false
	}
	old = h.conns[c.dev.Fingerprint]
	h.conns[c.dev.Fingerprint] = c
	return old, true
}

// unregister drops c unless a newer link took its place already; the
// presence hook hears of it only then.
func (h *Hub) unregister(c *conn) {
	now := h.now()
	h.mu.Lock()
	was := h.conns[c.dev.Fingerprint] == c
	if was {
		delete(h.conns, c.dev.Fingerprint)
		h.endedAt[c.dev.Fingerprint] = now
	}
	h.forgetOld(now)
	h.mu.Unlock()
	if was {
		c.ended()
	}
	if was && h.presence != nil {
		h.presence.Down(c.dev)
	}
}

// noteDispatch records that the job at queue place seq of the device is
// about to be written to a link.
func (h *Hub) noteDispatch(deviceID, seq uint64) {
	now := h.now()
	h.mu.Lock()
	h.dispatched[deviceID] = dispatchMark{upTo: max(seq, h.dispatched[deviceID].upTo), at: now}
	h.mu.Unlock()
}

// OfflineSince is when the device's last link ended since the hub
// started; zero when it is online or had no link since.
func (h *Hub) OfflineSince(fingerprint string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[fingerprint] != nil {
		return time.Time{}
	}
	return h.endedAt[fingerprint]
}

// HoldDevice runs fn while no link of the device can write a job: a live
// link's pump waits, and a new link's registration waits until fn
// returns. fn gets the highest queue place written to any of the
// device's links since the hub started (jobs above it were never handed
// to a phone by this process) and whether a link is live.
func (h *Hub) HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error {
	h.mu.Lock()
	for hold := h.holds[fingerprint]; hold != nil; hold = h.holds[fingerprint] {
		h.mu.Unlock()
		<-hold
		h.mu.Lock()
	}
	hold := make(chan struct{})
	h.holds[fingerprint] = hold
	c := h.conns[fingerprint]
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.holds, fingerprint)
		h.mu.Unlock()
		close(hold)
	}()
	if c != nil {
		c.pumpMu.Lock()
		defer c.pumpMu.Unlock()
	}
	h.mu.Lock()
	upTo := h.dispatched[deviceID].upTo
	h.mu.Unlock()
	return fn(upTo, c != nil)
}

// giveBack undoes the registration of c, refused right after it displaced
// old: old, if still open, gets its place back and the jobs queued meanwhile.
func (h *Hub) giveBack(c, old *conn) {
	h.mu.Lock()
	back := h.conns[c.dev.Fingerprint] == c && old != nil && !old.closed()
	switch {
	case back:
		h.conns[c.dev.Fingerprint] = old
	case h.conns[c.dev.Fingerprint] == c:
		delete(h.conns, c.dev.Fingerprint)
	}
	h.mu.Unlock()
	if back {
		old.pump()
	}
}

func (h *Hub) lookup(fingerprint string) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[fingerprint]
}

// Online reports whether the device has a live link.
func (h *Hub) Online(fingerprint string) bool { return h.lookup(fingerprint) != nil }

// LastSeen is when the device's live link last carried anything; zero when offline.
func (h *Hub) LastSeen(fingerprint string) time.Time {
	if c := h.lookup(fingerprint); c != nil {
		return time.Unix(0, c.lastSeen.Load()).UTC()
	}
	return time.Time{}
}

// Presence is Online and LastSeen of many devices at once, for a list of
// them: the devices with a live link, each with when it last carried
// anything.
func (h *Hub) Presence(fingerprints []string) map[string]time.Time {
	out := make(map[string]time.Time)
	h.mu.Lock()
	live := make(map[string]*conn)
	for _, fp := range fingerprints {
		if c := h.conns[fp]; c != nil {
			live[fp] = c
		}
	}
	h.mu.Unlock()
	for fp, c := range live {
		out[fp] = time.Unix(0, c.lastSeen.Load()).UTC()
	}
	return out
}

// Count is the number of live links.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Disconnect closes the device's link, if any, with code (4501 token
// revoked, 4503 deleted or disabled).
func (h *Hub) Disconnect(fingerprint string, code int, reason string) {
	if c := h.lookup(fingerprint); c != nil {
		c.closeWith(code, reason)
	}
}

// Configure pushes changed settings to the device's link, if any.
func (h *Hub) Configure(fingerprint string, cfg proto.Config) {
	if c := h.lookup(fingerprint); c != nil {
		c.send(cfg)
	}
}

// Pace changes how many sends a minute the device's link may carry (0: no
// pacing); it takes effect at once on a live link.
func (h *Hub) Pace(fingerprint string, perMinute int) {
	if c := h.lookup(fingerprint); c != nil {
		c.setPace(perMinute)
		c.pump()
	}
}

// Kick tells the hub that new jobs wait for the device.
func (h *Hub) Kick(fingerprint string) {
	if c := h.lookup(fingerprint); c != nil {
		c.kick()
	}
}

// Shutdown refuses new links, tells every phone to come back later (4012),
// and waits until every link goroutine has ended or ctx is done.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	conns := make([]*conn, 0, len(h.links))
	for c := range h.links {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.closeWith(proto.CloseRestarting, "server restarting")
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// Links that did not finish their close handshake in time are cut.
		for _, c := range conns {
			c.ws.CloseNow()
		}
		<-done
		return ctx.Err()
	}
}
