package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/smsparts"
)

// DefaultDeliveryPoll is how often the agent asks its transport about
// delivery reports and (for polling transports) new messages: often enough
// that a report reaches the server within seconds, rare enough to cost the
// device nothing.
const DefaultDeliveryPoll = 5 * time.Second

// DefaultHealthEvery is how often the agent reports the device's health on
// a live link (PROTOCOL.md 8.11): often enough for an alert on a battery
// running down, rare enough to cost the phone nothing. The server takes at
// most one report a minute, which is also the shortest interval allowed.
const DefaultHealthEvery = 15 * time.Minute

// DefaultToolTimeout bounds one send through the device's tool: a modem
// on a poor network can take a minute; anything longer is stuck. It bounds
// every other call to the transport too (its inventory before each hello,
// a delivery check, a recovery, an acknowledgement): a tool that hangs
// would otherwise hold the link's reconnects, or the delivery reports,
// for good.
const DefaultToolTimeout = 2 * time.Minute

// DefaultDeliveryWait bounds the wait for a delivery report: not every
// carrier sends one (PROTOCOL.md 17.7), and a job may stay "sent".
const DefaultDeliveryWait = 72 * time.Hour

// Options configure an Agent. Zero durations take their Default constants.
type Options struct {
	Config     ConfigFile
	Transport  Transport
	Journal    *Journal
	AppVersion string
	Logger     *slog.Logger
	HTTPClient *http.Client
	// BackoffBase, BackoffMax and StableAfter are PROTOCOL.md section 14's
	// BASE, CAP and STABLE.
	BackoffBase, BackoffMax, StableAfter time.Duration
	// ProbeEvery is the wait before probing a disabled or deleted device.
	ProbeEvery time.Duration
	// Pacer spaces the transport's sends; nil sends as fast as the tool goes.
	Pacer *Pacer
	// DeliveryPoll is the interval of the delivery poller (and of the
	// uploader's look for files to upload again).
	DeliveryPoll time.Duration
	// InboundMediaBytes caps a received file the agent forwards
	// (DefaultInboundMediaBytes); transports skip the download of a bigger one.
	InboundMediaBytes int64
	// HealthEvery is the interval of health reports on a live link, at
	// least a minute (DefaultHealthEvery when zero).
	HealthEvery time.Duration
	// UploadStall is the time an upload of a received file may take for
	// each 256 KiB and for its answer (DefaultUploadStall when zero); one
	// past it is given up and the file uploaded again later.
	UploadStall time.Duration
}

// Agent is one device's agent. Run it once.
type Agent struct {
	opt Options
	log *slog.Logger
	j   *Journal
	tr  Transport

	// ackMu makes "journal the job, then write its ack" one step as seen by
	// the executor, so a job's status never overtakes its ack.
	ackMu sync.Mutex

	execWake  chan struct{} // a job was taken
	pumpWake  chan struct{} // a report or an inbound message is waiting, or an answer came
	mediaWake chan struct{} // a received file waits for its upload
	ackWake   chan struct{} // an inbound message was acknowledged by the server
	mu        sync.Mutex
	clock     clocks
	serverAt  time.Time     // server_time of the last welcome (zero: none yet)
	bootAt    time.Duration // the boot clock when it came
	inventory Inventory     // what the last hello announced
	known     chan struct{} // closed once an inventory was read
	knownOnce sync.Once

	dialTimeout time.Duration // bounds each upgrade (dialTimeout; tests shorten it)
	pruneEvery  time.Duration // how often the journal forgets finished jobs (pruneEvery; tests shorten it)
	toolTimeout time.Duration // bounds each call to the transport (DefaultToolTimeout; tests shorten it)
}

// askInventory asks the transport what the device serves, within toolTimeout.
func (a *Agent) askInventory(ctx context.Context) (Inventory, error) {
	ctx, cancel := context.WithTimeout(ctx, a.toolTimeout)
	defer cancel()
	return a.tr.Inventory(ctx)
}

// New returns an agent.
func New(opt Options) *Agent {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.BackoffBase <= 0 {
		opt.BackoffBase = DefaultBackoffBase
	}
	if opt.BackoffMax <= 0 {
		opt.BackoffMax = DefaultBackoffMax
	}
	if opt.StableAfter <= 0 {
		opt.StableAfter = DefaultStableAfter
	}
	if opt.ProbeEvery <= 0 {
		opt.ProbeEvery = DefaultProbeEvery
	}
	if opt.DeliveryPoll <= 0 {
		opt.DeliveryPoll = DefaultDeliveryPoll
	}
	if opt.InboundMediaBytes <= 0 {
		opt.InboundMediaBytes = DefaultInboundMediaBytes
	}
	if opt.HealthEvery <= 0 {
		opt.HealthEvery = DefaultHealthEvery
	}
	if opt.UploadStall <= 0 {
		opt.UploadStall = DefaultUploadStall
	}
	opt.HealthEvery = max(opt.HealthEvery, proto.HealthIntervalSeconds*time.Second)
	return &Agent{opt: opt, log: opt.Logger, j: opt.Journal, tr: opt.Transport,
		clock: realClocks(), dialTimeout: dialTimeout, pruneEvery: pruneEvery, toolTimeout: DefaultToolTimeout, execWake: make(chan struct{}, 1), pumpWake: make(chan struct{}, 1), mediaWake: make(chan struct{}, 1), ackWake: make(chan struct{}, 1), known: make(chan struct{})}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run checks the transport, settles what a previous run left unfinished
// (once the device answers), and holds the link until ctx ends (nil) or the server says not to
// come back (*FatalError).
func (a *Agent) Run(ctx context.Context) error {
	if err := a.tr.Check(ctx); err != nil {
		return err
	}
	// A device that is not ready yet (a modem still starting) is asked
	// again before each link; jobs wait until it answered once.
	if inv, err := a.askInventory(ctx); err != nil {
		a.log.Warn("the device is not ready; asking again before each connection", "transport", a.tr.Name(), "err", err)
	} else {
		a.setInventory(inv)
	}
	// A record the disk damaged is replaced or dropped before anything
	// reads the journal, and said in the log: the agent starts all the same.
	notes, serr := a.j.Salvage(time.Now())
	for _, n := range notes {
		a.log.Warn("journal repaired: " + n)
	}
	if serr != nil {
		return serr
	}
	a.prune()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { a.executor(ctx) })
	wg.Go(func() { a.deliveryPoller(ctx) })
	wg.Go(func() { a.acknowledger(ctx) })
	wg.Go(func() { a.uploader(ctx) })
	wg.Go(func() { a.pruner(ctx) })
	// A transport that can no longer work until its user acts (a WhatsApp
	// session logged out) ends Run with a *FatalError from Receive, rather
	// than the agent reconnecting in a loop with nothing to send from.
	var stopped error
	wg.Go(func() {
		if err := a.tr.Receive(ctx, sink{a}); err != nil && ctx.Err() == nil {
			var fatal *FatalError
			if errors.As(err, &fatal) {
				a.log.Error("stopping: "+fatal.Reason, "transport", a.tr.Name())
				stopped = err
				cancel()
				return
			}
			a.log.Error("receiving stopped", "transport", a.tr.Name(), "err", err)
		}
	})
	err := a.holdLink(ctx)
	cancel()
	wg.Wait()
	if stopped != nil {
		return stopped
	}
	return err
}

// pruneEvery is how often a running agent forgets the finished jobs it
// no longer needs (Journal.Prune), and the client_ids of received messages
// its transport's source can no longer show again (ClearedKeys), as it does
// at start: an agent that runs for months keeps its journal, and the scans
// of it, small.
const pruneEvery = time.Hour

func (a *Agent) prune() {
	n, err := a.j.Prune(time.Now())
	if err != nil {
		a.log.Error("journal prune failed", "err", err)
	} else if n > 0 {
		a.log.Info("journal pruned", "jobs", n)
	}
	ck, ok := a.tr.(ClearedKeys)
	if !ok {
		return
	}
	n, err = a.j.pruneInboundIDs(a.clock.wall(), ck.ClearedKeyRetention())
	if err != nil {
		a.log.Error("journal prune of received message ids failed", "err", err)
	} else if n > 0 {
		a.log.Info("journal pruned", "received_message_ids", n)
	}
}

// pruner prunes the journal every pruneEvery until ctx ends.
func (a *Agent) pruner(ctx context.Context) {
	tick := time.NewTicker(a.pruneEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.prune()
		}
	}
}

func (a *Agent) setInventory(inv Inventory) {
	a.mu.Lock()
	a.inventory = inv
	a.mu.Unlock()
	a.knownOnce.Do(func() { close(a.known) })
}

// serverNow is the server's clock (clock.go): the last welcome's
// server_time plus the boot clock's time since; the local date before any.
func (a *Agent) serverNow() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.serverAt.IsZero() {
		return a.clock.wall()
	}
	return a.serverAt.Add(a.clock.boot() - a.bootAt)
}

// synced notes the server's clock of a welcome that came now.
func (a *Agent) synced(serverTime time.Time) {
	a.mu.Lock()
	a.serverAt, a.bootAt = serverTime, a.clock.boot()
	a.mu.Unlock()
}

const timeLayout = "2006-01-02T15:04:05.000Z"

func stamp(t time.Time) string { return t.UTC().Format(timeLayout) }

// recover settles jobs that were handed to the transport when the agent
// stopped. The rule (PROTOCOL.md 9.4): such a job is never handed over
// again; the transport may prove it went out (sent), otherwise it is
// reported failed with outcome_unknown. A transport that could not tell
// because the agent is stopping was not given its chance: the job stays
// dispatched, and the next start asks again.
func (a *Agent) recover(ctx context.Context) error {
	jobs, err := a.j.InState(StateDispatched)
	if err != nil {
		return err
	}
	for _, job := range jobs {
		rctx, cancel := context.WithTimeout(ctx, a.toolTimeout)
		out, known := a.tr.Recover(rctx, job)
		cancel()
		if !known && ctx.Err() != nil {
			return nil
		}
		if !known {
			out = Outcome{Status: proto.StatusFailed, Error: "outcome_unknown"}
		}
		a.log.Info("job recovered after a restart", "id", job.ID, "status", out.Status, "error", out.Error, "proved", known)
		if err := a.finish(job.ID, out); err != nil {
			return err
		}
	}
	return nil
}

// finish journals an outcome and its report and wakes the sender.
func (a *Agent) finish(id string, out Outcome) error {
	st := proto.Status{ID: id, Status: out.Status, At: stamp(time.Now())}
	if out.Status == proto.StatusDelivered {
		st.Detail = out.Detail
	}
	if out.Status == proto.StatusFailed {
		st.Error = out.Error
		if st.Error == "" {
			st.Error = "generic_failure"
		}
	}
	awaiting := out.Status == proto.StatusSent && out.AwaitDelivery
	if err := a.j.Finish(id, st, out.Ref, awaiting, time.Now()); err != nil {
		return fmt.Errorf("journal: finish job %s: %w", id, err)
	}
	wake(a.pumpWake)
	return nil
}

// executor carries out taken jobs one at a time, in the order they came.
func (a *Agent) executor(ctx context.Context) {
	select { // no job is judged against an unknown inventory
	case <-ctx.Done():
		return
	case <-a.known:
	}
	// First settle what the last run left dispatched, with the device ready
	// to tell what became of it.
	if err := a.recover(ctx); err != nil {
		a.log.Error("recovering interrupted jobs failed", "err", err)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for ctx.Err() == nil {
			a.ackMu.Lock()
			job, ok, err := a.j.NextTaken()
			a.ackMu.Unlock()
			if err != nil {
				a.log.Error("journal read failed", "err", err)
				break
			}
			if !ok {
				break
			}
			if err := a.execute(ctx, job); err != nil {
				if ctx.Err() == nil {
					a.log.Error("job not carried out", "id", job.ID, "err", err)
				}
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.execWake:
		case <-tick.C:
		}
	}
}

// execute runs one taken job. An error leaves it taken (journal trouble,
// or ctx ended while it waited for its turn).
func (a *Agent) execute(ctx context.Context, job Job) error {
	if out, bad := a.refuse(job); bad {
		a.log.Info("job failed", "id", job.ID, "channel", job.Channel, "error", out.Error)
		if err := a.j.Dispatch(job.ID, time.Now()); err != nil {
			return err
		}
		return a.finish(job.ID, out)
	}
	if a.opt.Pacer != nil && job.Channel == proto.ChannelSMS {
		done, err := a.opt.Pacer.Wait(ctx, smsparts.Count(job.Message))
		if err != nil {
			return err
		}
		defer done() // the parts went no earlier than the send's end
	}
	// Expiry is checked right before the send, on the server's clock.
	if exp, err := time.Parse(time.RFC3339Nano, job.ExpiresAt); err == nil && !a.serverNow().Before(exp) {
		a.log.Info("job failed", "id", job.ID, "error", "expired")
		if err := a.j.Dispatch(job.ID, time.Now()); err != nil {
			return err
		}
		return a.finish(job.ID, Outcome{Status: proto.StatusFailed, Error: "expired"})
	}
	now := time.Now()
	if err := a.j.Dispatch(job.ID, now); err != nil {
		return err
	}
	job.DispatchedAt = now
	job.Remember = func(ref string) error { return a.j.Remember(job.ID, ref) }
	// A send under way is not cut off by a shutdown (the tool killed in the
	// middle leaves the outcome unknown); it gets DefaultToolTimeout.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.toolTimeout)
	out, err := a.tr.Execute(tctx, job)
	timedOut := tctx.Err() != nil
	cancel()
	if err != nil && timedOut {
		// Killed after the timeout: it may have gone out. The transport
		// may tell; otherwise the outcome is unknown, as after a crash.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.toolTimeout)
		var known bool
		if out, known = a.tr.Recover(rctx, job); !known {
			out = Outcome{Status: proto.StatusFailed, Error: "outcome_unknown"}
		}
		cancel()
		a.log.Error("job timed out", "id", job.ID, "status", out.Status, "error", out.Error, "err", err)
	} else if err != nil {
		out = Outcome{Status: proto.StatusFailed, Error: failureCode(err)}
		a.log.Error("job failed", "id", job.ID, "channel", job.Channel, "sim_slot", job.SIMSlot, "error", out.Error, "err", err)
	} else {
		a.log.Info("job "+out.Status, "id", job.ID, "channel", job.Channel, "sim_slot", job.SIMSlot, "error", out.Error, "await_delivery", out.AwaitDelivery)
	}
	return a.finish(job.ID, out)
}

// failureCode turns a transport error into a status error code.
func failureCode(err error) string {
	if errors.Is(err, ErrMediaUnavailable) {
		return "media_unavailable"
	}
	var te *ToolError
	if errors.As(err, &te) {
		switch te.Kind {
		case "missing":
			return "tool_missing"
		case "permission":
			return "permission_denied"
		}
	}
	return "generic_failure"
}

// refuse checks a job the device cannot carry out (PROTOCOL.md 9.3).
func (a *Agent) refuse(job Job) (Outcome, bool) {
	a.mu.Lock()
	inv := a.inventory
	a.mu.Unlock()
	fail := func(code string) (Outcome, bool) { return Outcome{Status: proto.StatusFailed, Error: code}, true }
	switch job.Channel {
	case proto.ChannelSMS:
		if len(inv.SIMs) == 0 {
			return fail("unsupported_channel")
		}
		slot := job.SIMSlot
		if slot == "" {
			slot = proto.SIM1
		}
		if !proto.IsSIMSlot(slot) || job.To == "" {
			return fail("invalid_job")
		}
		for _, s := range inv.SIMs {
			if s.Slot == slot {
				return Outcome{}, false
			}
		}
		return fail("no_sim")
	case proto.ChannelWhatsApp:
		if len(inv.WhatsApp) == 0 {
			return fail("unsupported_channel")
		}
	case proto.ChannelIMessage:
		if len(inv.IMessage) == 0 {
			return fail("unsupported_channel")
		}
	default:
		return fail("unsupported_channel")
	}
	if job.To == "" {
		return fail("invalid_job")
	}
	return Outcome{}, false
}

// deliveryPoller asks the transport about sent messages whose delivery
// report is due, until each is final or DefaultDeliveryWait passed. A
// check that keeps failing (a modem gone for good) ends at the same wait:
// the job stays sent, rather than being asked about, and kept in the
// journal, for ever.
func (a *Agent) deliveryPoller(ctx context.Context) {
	tick := time.NewTicker(a.opt.DeliveryPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		jobs, err := a.j.InState(StateAwaiting)
		if err != nil {
			a.log.Error("journal read failed", "err", err)
			continue
		}
		for _, job := range jobs {
			dctx, cancel := context.WithTimeout(ctx, a.toolTimeout)
			d, err := a.tr.Delivery(dctx, job.Ref)
			cancel()
			if err != nil && ctx.Err() != nil {
				return
			}
			if err != nil {
				a.log.Warn("delivery check failed", "id", job.ID, "err", err)
			}
			if err != nil || !d.Final {
				if !job.DispatchedAt.IsZero() && time.Since(job.DispatchedAt) > DefaultDeliveryWait {
					a.log.Info("no delivery report came; the job stays sent", "id", job.ID)
					if err := a.j.Finish(job.ID, proto.Status{}, "", false, time.Now()); err != nil {
						a.log.Error("journal write failed", "err", err)
					}
				}
				continue
			}
			a.log.Info("job "+d.Status, "id", job.ID, "error", d.Error)
			if err := a.finish(job.ID, Outcome{Status: d.Status, Error: d.Error, Detail: d.Detail}); err != nil {
				a.log.Error("journal write failed", "err", err)
			}
		}
	}
}

// acknowledger lets the transport delete (or mark) at the source each
// inbound message the server stored or refused for good, retrying until it
// succeeds.
func (a *Agent) acknowledger(ctx context.Context) {
	tick := time.NewTicker(a.opt.DeliveryPoll)
	defer tick.Stop()
	for {
		recs, err := a.j.inbound()
		if err != nil {
			a.log.Error("journal read failed", "err", err)
		}
		for _, r := range recs {
			if !r.Acked || ctx.Err() != nil {
				continue
			}
			key := r.Key
			if key == "" { // journaled before the key was kept
				key = r.Frame.ClientID
			}
			msg := Received{Key: key, Channel: r.Frame.Channel, From: r.Frame.From, Text: r.Frame.Message, Ref: r.Ref}
			actx, cancel := context.WithTimeout(ctx, a.toolTimeout)
			err := a.tr.Acknowledge(actx, msg)
			cancel()
			if err != nil {
				a.log.Warn("could not clear a stored message at the source; retrying", "client_id", r.Frame.ClientID, "err", err)
				continue
			}
			if r.Refused {
				a.log.Info("a message the server refused for good was cleared at the source", "client_id", r.Frame.ClientID)
			}
			if err := a.j.forgetInbound(r.Frame.ClientID, a.clock.wall()); err != nil {
				a.log.Error("journal write failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.ackWake:
		case <-tick.C:
		}
	}
}
