package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/logspacing"
	"github.com/simrelay/simrelay/internal/retention"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Devices is the device service as the hub uses it.
type Devices interface {
	Authenticate(ctx context.Context, token string) (store.Device, error)
	Get(ctx context.Context, companyID uint64, fingerprint string) (store.Device, error)
	// Hello and Seen act on the registration the link authenticated as
	// (company and device id), never on a later one of the same fingerprint.
	// Hello stores what CheckHello passed.
	Hello(ctx context.Context, dev store.Device, h device.CheckedHello) (store.Device, error)
	// CheckHello holds a hello's device fields to Hello's rules, storing
	// nothing, and returns them for Hello (a hello is checked once): a
	// problem refuses the hello before any part of it is stored.
	CheckHello(selectedSIM string, sims []store.SIM, appVersion string, health *proto.Health) (device.CheckedHello, error)
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
	// Pending returns up to limit jobs waiting for the device: those with
	// a priority first, highest first, from the head of their queue
	// whatever after is (Seq 0), then the plain jobs after the one with
	// seq after, oldest first.
	Pending(ctx context.Context, dev store.Device, after uint64, limit int) ([]sms.Job, error)
}

// Presence is told when a device's link is registered and when its
// registered link ends, or a link whose hello was stored is refused after
// all (device.Presence turns that into device.online and device.offline).
// Up runs on the link's set-up goroutine (run), Down on its reader as it
// ends, or on the set-up goroutine for a link refused after its hello;
// neither may block for long.
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
	// does not answer (ServeHTTP); linksCut those of links closed for it
	// (storeFault); seenLost those of links that ended meanwhile, their
	// last seen time not stored (seenFault).
	unavailable logspacing.Spacer
	linksCut    logspacing.Spacer
	seenLost    logspacing.Spacer
	// gate knows when the store is out of reach, so that upgrades are
	// refused without asking it (outage.go).
	gate storeGate

	mu       sync.Mutex
	conns    map[string]*conn   // registered links by fingerprint; guarded by mu
	links    map[*conn]struct{} // every link, in hello or registered; guarded by mu
	draining bool               // guarded by mu
	// dispatched is, per device id, the highest queue place written to any
	// of its links since the hub started; holds are the devices (by id) whose
	// queued jobs a failover is moving (HoldDevice); endedAt is when each
	// device's last link ended, by device id too (a device paired again
	// under the fingerprint after a delete is another, which inherits
	// nothing); forgot is when the last two were last pruned, and for how
	// long they keep (forget.go). All guarded by mu.
	dispatched map[uint64]dispatchMark
	holds      map[uint64]*deviceHold
	endedAt    map[uint64]time.Time
	forgot     retention.Sweep

	// paces is each paced device's limiter, by device id, shared by its
	// links and kept for its window after the last ended (pace.go);
	// pacesSwept is when it was last scanned. Guarded by paceMu.
	paceMu     sync.Mutex
	paces      map[uint64]*devicePace
	pacesSwept time.Time

	// wg counts every goroutine of every link; a link starts one only
	// through conn.spawn. waiting is set once Shutdown waits on wg: from
	// then on no goroutine is counted from zero (guarded by mu).
	wg      sync.WaitGroup
	waiting bool
	// tasks counts the goroutines of wg by what they do, for Shutdown's
	// report of those still running at its deadline.
	tasks [taskKinds]atomic.Int64
}

// task is what a goroutine of a link does (conn.spawn).
type task int

const (
	taskSetup    task = iota // the hello, the registration, the welcome and the first pump (run)
	taskReader               // the phone's frames; a store write of an inbound or health report
	taskAnswerer             // reports waiting for their commit
	taskWriter               // frames on their way to the phone
	taskEnd                  // a closed link's last seen and end, stored
	taskClose                // a close handshake
	taskPing                 // a ping's round trip
	taskPump                 // a pump for kicks (conn.kick): sends and releases; or for a pace's or gap's timer (conn.timerPump)
	taskKinds
)

var taskNames = [taskKinds]string{"set-up", "reader", "answerer", "writer", "end", "close handshake", "ping", "pump"}

// running says which goroutines of links run now, by kind ("2 answerer,
// 1 reader"); "" when none.
func (h *Hub) running() string {
	var parts []string
	for k := range taskKinds {
		if n := h.tasks[k].Load(); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, taskNames[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// New returns a hub.
func New(cfg Config, devices Devices, intake Intake, log *slog.Logger, now func() time.Time) *Hub {
	cfg.defaults()
	return &Hub{cfg: cfg, devices: devices, intake: intake, log: log, now: now, pings: newPinger(cfg.PingInterval), conns: map[string]*conn{}, links: map[*conn]struct{}{},
		dispatched: map[uint64]dispatchMark{}, holds: map[uint64]*deviceHold{}, endedAt: map[uint64]time.Time{},
		paces: map[uint64]*devicePace{}, forgot: retention.Sweep{Life: cfg.JobLife}}
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

// Shutdown refuses new links, tells every phone to come back later (4012),
// and waits until every link goroutine has ended or ctx is done. At ctx's
// end it cuts every link that is left and returns at once, with ctx's
// error and the goroutines of links still running (ShutdownError): one
// waiting on the store (a report's commit, a last seen, an inbound) ends
// by the store's own deadline or its Close, which the caller comes to next.
// Nothing answered is lost by not waiting for them: the hub answers a
// report or an inbound only once the store made it durable, and a report
// it did not answer is sent again by its phone on its next link (an ack
// or a status again by job id, an inbound by client_id, each taken once).
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
	h.mu.Lock()
	h.waiting = true // a link whose goroutines all ended starts no other (conn.spawn)
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// Links that did not finish their close handshake in time are cut,
		// without waiting for the handshake under way (sever).
		for _, c := range conns {
			c.sever()
		}
		return &ShutdownError{Err: ctx.Err(), Running: h.running()}
	}
}

// ShutdownError is Shutdown's answer at its context's end: Running says
// which goroutines of links still ran then, by kind ("" when none).
type ShutdownError struct {
	Err     error
	Running string
}

func (e *ShutdownError) Error() string {
	if e.Running == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + "; link goroutines still running: " + e.Running
}

func (e *ShutdownError) Unwrap() error { return e.Err }
