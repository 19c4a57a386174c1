package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// The states of a link: it ends once, cut or with a close handshake.
const (
	linkOpen    = iota
	linkCut     // the network failed, or the server cut it: nobody to say goodbye to
	linkClosing // a close handshake is under way; do not cut the connection
)

// conn is one phone's link.
type conn struct {
	hub   *Hub
	ws    *websocket.Conn
	sock  net.Conn     // the connection under ws; nil if unknown
	dev   store.Device // as of hello; owned by the reader goroutine after that
	token string       // the device token of the upgrade, checked again once registered, then dropped

	qmu     sync.Mutex
	queue   [][]byte // frames waiting for the phone, at most QueueLen; guarded by qmu
	queued  int      // bytes in queue, at most QueueBytes; guarded by qmu
	writing bool     // the writer goroutine is running (or held until the welcome); guarded by qmu

	pingSlot           int                      // 1 + the pinger's slot of the next ping, 0 when none; guarded by hub.pings.mu
	pingPrev, pingNext *conn                    // the other links of that slot; guarded by hub.pings.mu
	ping               atomic.Pointer[pingWait] // the ping waiting for its pong; nil between pings

	state    atomic.Int32  // linkOpen until the link ends, once
	frames   atomic.Uint32 // frames read from the phone, counted (wrapping) to tell a live phone from a silent one (heard)
	handling atomic.Bool   // the reader is taking a frame, not reading: it may wait on the store
	lastSeen atomic.Int64  // unix nanoseconds of the last frame or pong

	flood   *rate.Limiter // what the phone sends unasked (flood.go), from its first such frame; guarded by floodMu
	floodMu sync.Mutex    // the reader and the answerer both charge
	pings   *rate.Limiter // the phone's own WebSocket pings (flood.go), from its first; guarded by floodMu

	room      chan struct{} // a token per frame waiting for its answer (answers.go); made by the reader
	amu       sync.Mutex
	answers   []answer // answers waiting, in the order of the frames; guarded by amu
	answering bool     // the answerer goroutine is running; guarded by amu

	pumpMu    sync.Mutex          // serialises pumps, which read the store
	inflight  map[string]struct{} // sends written to this link, not yet acked (nil when none); guarded by pumpMu
	priority  map[string]struct{} // those of them with a priority (nil when none); guarded by pumpMu
	cursor    uint64              // seq of the last job this link took from the queue; guarded by pumpMu
	owed      bool                // places freed in the window since the last pump (refill); guarded by pumpMu
	queueEnd  bool                // the last read of the SMS queue reached its end, and no kick came since; guarded by pumpMu
	pace      *rate.Limiter       // nil: no pacing; guarded by pumpMu
	paceRate  int                 // the sends per minute pace was made for; guarded by pumpMu
	paceTimer *time.Timer         // a pump waiting for the pace; guarded by pumpMu
	lines     []line              // WhatsApp numbers and iMessage handles of the hello (agents.go); guarded by pumpMu
	gapTimer  *time.Timer         // a pump waiting for a number's gap; guarded by pumpMu

	epoch    atomic.Uint64 // the link's fencing epoch in a cluster (links.go); 0 on one node or until claimed
	fencedBy atomic.Uint64 // the newest epoch of the device heard of from other nodes
}

func newConn(h *Hub, ws *websocket.Conn, sock net.Conn, dev store.Device, token string) *conn {
	// writing starts true: the writer is held until open sends the welcome.
	c := &conn{hub: h, ws: ws, sock: sock, dev: dev, token: token, writing: true}
	if l, ok := sock.(*linkIO); ok {
		l.onPong = c.ponged // the reader takes pongs between frames (awaitFrame)
	}
	c.touch()
	return c
}

// pingWait is a ping of the link's own (linkIO.ping) waiting for its pong,
// which the link's reader takes between frames.
type pingWait struct {
	done chan struct{} // closed by the pong, or by the link's end
	once sync.Once
}

func (w *pingWait) end() { w.once.Do(func() { close(w.done) }) }

// ponged is a pong the reader took before the library saw it.
func (c *conn) ponged() {
	c.touch()
	if w := c.ping.Load(); w != nil {
		w.end()
	}
}

func (c *conn) touch() { c.lastSeen.Store(c.hub.now().UnixNano()) }

// run is the reader goroutine: hello, then frames until the link ends.
func (c *conn) run() {
	h := c.hub
	defer h.wg.Done()
	if !c.hello() {
		c.finish()
		return
	}
	old, ok := h.register(c)
	if !ok {
		c.closeWith(proto.CloseRestarting, "server restarting")
		c.finish()
		return
	}
	// The token and status were checked before the upgrade; a re-registration,
	// disable or delete since then found no registered link to close. Now
	// that this link is registered, every later change reaches it, so one
	// more look closes the gap. Only a link that passes it replaces the old
	// one: a stale link must not knock the phone's real link off.
	fresh, allowed := c.stillAllowed()
	if !allowed {
		h.giveBack(c, old)
		if h.presence != nil {
			h.presence.Down(c.dev) // its hello reported it online
		}
		c.finish()
		return
	}
	if !c.claim() {
		h.giveBack(c, old)
		if h.presence != nil {
			h.presence.Down(c.dev)
		}
		c.closeWith(proto.CloseRestarting, "server restarting")
		c.finish()
		return
	}
	if old != nil {
		old.closeWith(proto.CloseReplaced, "replaced by a newer connection")
	}
	uncount(c.sock) // before the welcome: the phone's next connection finds its place free
	// The device as read after registering: a settings change made since
	// the hello is in it, and any later one reaches this link as config.
	c.setPace(fresh.SMSPerMinute)
	// Frames queued for the link since it became findable wait behind the
	// welcome, which carries the device's current settings.
	c.open(proto.Welcome{
		DeviceFingerprint:   c.dev.Fingerprint,
		ServerTime:          h.now().UTC().Format(timeLayout),
		PingIntervalSeconds: int(h.cfg.PingInterval / time.Second),
		MaxInflight:         h.cfg.MaxInflight,
		SelectedSIM:         fresh.SelectedSIM,
		DeviceName:          fresh.Name,
	})
	h.pings.after(c, jitter(h.cfg.PingInterval))
	if h.presence != nil {
		h.presence.Up(fresh)
	}
	c.pump()
	// The set-up above (store reads and writes) grew this goroutine's stack.
	// The link's long, mostly idle life goes on in a fresh goroutine whose
	// stack starts small; this one ends here.
	h.wg.Add(1)
	go c.reader()
}

// reader reads the phone's frames until the link ends.
func (c *conn) reader() {
	defer c.hub.wg.Done()
	defer c.finish()
	defer c.hub.unregister(c)
	c.readLoop()
}

const timeLayout = "2006-01-02T15:04:05.000Z"

// hello waits for the phone's first frame and records it.
func (c *conn) hello() bool {
	h := c.hub
	timer := time.AfterFunc(h.cfg.HelloTimeout, func() { c.closeWith(proto.CloseHelloTimeout, "no hello in time") })
	_, data, err := c.ws.Read(context.Background())
	timer.Stop()
	if err != nil {
		return false
	}
	f, err := proto.Decode(withoutNUL(data))
	hello, isHello := f.(*proto.Hello)
	switch {
	case frameType(data) != proto.TypeHello:
		c.fail(proto.CloseProtocolError, "protocol_error", "The first frame must be hello.")
		return false
	case err != nil || !isHello:
		c.fail(proto.CloseProtocolError, "protocol_error", "hello: "+frameProblem(err))
		return false
	}
	if hello.Protocol != proto.Version {
		c.fail(proto.CloseUnsupportedVer, "unsupported_protocol", "This server speaks protocol version 1.")
		return false
	}
	sims := make([]store.SIM, 0, len(hello.SIMs))
	for _, s := range hello.SIMs {
		sims = append(sims, store.SIM(s))
	}
	if hello.SIMs == nil {
		sims = nil
	}
	dev, err := h.devices.Hello(context.Background(), c.dev, hello.SelectedSIM, sims, hello.AppVersion, hello.Health)
	if pe, ok := problem.As(err); ok {
		c.fail(proto.CloseProtocolError, "invalid_hello", pe.Refield("hello."+pe.Field).Message)
		return false
	}
	if errors.Is(err, store.ErrNotFound) {
		c.closeWith(proto.CloseDeviceGone, "device deleted")
		return false
	}
	if err != nil {
		h.log.Error("store hello", "device", c.dev.Fingerprint, "err", err)
		c.closeWith(int(websocket.StatusInternalError), "server error")
		return false
	}
	// The link needs none of the health report: it stays in the store.
	dev.Health = nil
	c.dev = dev
	if h.agents != nil && (len(hello.WhatsApp) > 0 || len(hello.IMessage) > 0) {
		ids, err := h.agents.Announce(context.Background(), dev, *hello)
		if pe, ok := problem.As(err); ok {
			c.fail(proto.CloseProtocolError, "invalid_hello", pe.Refield("hello."+pe.Field).Message)
			return false
		}
		if err != nil {
			h.log.Error("store hello numbers", "device", c.dev.Fingerprint, "err", err)
			c.closeWith(int(websocket.StatusInternalError), "server error")
			return false
		}
		for _, id := range ids {
			c.lines = append(c.lines, line{id: id})
		}
	}
	c.touch()
	return true
}

// stillAllowed re-checks the device token and status, closing the link with
// the code the phone must see when either changed; it returns the device as
// stored now.
func (c *conn) stillAllowed() (store.Device, bool) {
	token := c.token
	c.token = "" // checked once more, here; not kept for the link's life
	dev, err := c.hub.devices.Authenticate(context.Background(), token)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The token is dead: the device was deleted, or registered again with
		// a new token. A device of the fingerprint with another id is a new
		// registration after a delete: for this link, the device is gone.
		if d, err := c.hub.devices.Get(context.Background(), c.dev.CompanyID, c.dev.Fingerprint); err != nil || d.ID != c.dev.ID {
			c.closeWith(proto.CloseDeviceGone, "device deleted")
		} else {
			c.closeWith(proto.CloseBadToken, "token revoked")
		}
		return dev, false
	case err != nil:
		c.hub.log.Error("re-check device token", "device", c.dev.Fingerprint, "err", err)
		c.closeWith(int(websocket.StatusInternalError), "server error")
		return dev, false
	case dev.Status == store.DeviceDisabled:
		c.closeWith(proto.CloseDeviceGone, "device disabled")
		return dev, false
	}
	return dev, true
}

// setPace spaces sends evenly: one every minute/perMinute, no bursts, which
// is what keeps a phone under Android's per-app SMS quota.
// An unchanged rate keeps its limiter, so that a settings change of another
// kind does not let a send out early.
func (c *conn) setPace(perMinute int) {
	c.pumpMu.Lock()
	defer c.pumpMu.Unlock()
	switch {
	case perMinute <= 0:
		c.pace, c.paceRate = nil, 0
	case perMinute != c.paceRate || c.pace == nil:
		c.pace, c.paceRate = rate.NewLimiter(rate.Every(time.Minute/time.Duration(perMinute)), 1), perMinute
	}
}

// readLoop handles the phone's frames. Store writes start here, on the
// link's own goroutine, and its answers wait on its own answerer
// (answers.go), so one slow phone slows only itself. Between frames it
// waits in awaitFrame, on a stack small enough for the runtime to shrink
// to its least: an idle link's goroutine costs 2 KB of stack, not the 4 KB
// a wait inside the library's Read takes.
func (c *conn) readLoop() {
	l, _ := c.sock.(*linkIO)
	for {
		if l != nil {
			l.awaitFrame()
		}
		if !c.readFrame() {
			return
		}
	}
}

// readFrame reads and handles one frame; false ends the link. It is not
// inlined, so that its frame is off the stack while readLoop waits.
//
//go:noinline
func (c *conn) readFrame() bool {
	ctx := context.Background()
	_, data, err := c.ws.Read(ctx)
	if err != nil || c.closed() {
		return false // the answerer may have closed the link (flood, a store fault)
	}
	c.touch()
	c.frames.Add(1)
	f, err := proto.Decode(withoutNUL(data))
	if errors.Is(err, proto.ErrUnknownType) {
		if !c.charge() {
			return false
		}
		refusal := proto.Error{Code: "unknown_frame", Message: fmt.Sprintf("Unknown frame type %q; the frame was ignored.", echo(frameType(data)))}
		c.answerNow(func() { c.answerError(refusal) })
		return true
	}
	if err != nil {
		c.fail(proto.CloseProtocolError, "protocol_error", "A frame could not be read: "+frameProblem(err))
		return false
	}
	c.handling.Store(true)
	defer c.handling.Store(false)
	return c.handle(ctx, f)
}

// handle takes one frame; false ends the link. An ack or status goes to the
// store's group commit and is answered once durable, in order, by the
// answerer (answers.go). Reports are charged to the flood limit only when
// they answer nothing the server sent (flood.go), which is known once the
// commit says whether they moved their job.
func (c *conn) handle(ctx context.Context, f proto.Frame) bool {
	h := c.hub
	switch f := f.(type) {
	case *proto.Ack:
		r := h.intake.Ack(ctx, c.dev, f.ID)
		c.later(func() {
			moved, err := r.Wait()
			// A refused ack (no such job) frees the slot too: the phone will not ack it again.
			inflight := c.settle(f.ID)
			if (err != nil || !(moved || inflight)) && !c.charge() {
				return
			}
			c.refused(err, "ack", proto.Error{ID: f.ID})
		})
	case *proto.Status:
		r := h.intake.Status(ctx, c.dev, *f)
		c.later(func() {
			moved, err := r.Wait()
			if err != nil && !c.charge() {
				return
			}
			if c.refused(err, "status", proto.Error{ID: f.ID}) {
				return
			}
			if inflight := c.settle(f.ID); !(moved || inflight) && !c.charge() {
				return
			}
			c.send(proto.StatusAck{ID: f.ID, Status: f.Status, Detail: f.Detail})
		})
	case *proto.Inbound:
		if !c.charge() {
			return false
		}
		var ack proto.InboundAck
		var err error
		if isAgentChannel(f.Channel) && h.agents != nil {
			ack, err = h.agents.Inbound(ctx, c.dev, *f)
		} else {
			ack, err = h.intake.Inbound(ctx, c.dev, *f)
		}
		c.answerNow(func() {
			if !c.refused(err, "inbound", proto.Error{ClientID: f.ClientID}) {
				c.send(ack)
			}
		})
		return !c.closed()
	case *proto.Health:
		// Unasked, so charged; the store refuses reports closer together
		// than the health interval, so a phone cannot make it write more.
		if !c.charge() {
			return false
		}
		err := h.devices.Health(ctx, c.dev, *f)
		c.answerNow(func() {
			if errors.Is(err, store.ErrNotFound) || problem.Is(err, problem.NotFound) {
				err = nil // deleted while connected: its close is on the way
			}
			c.refused(err, "health", proto.Error{})
		})
		return !c.closed()
	default:
		c.fail(proto.CloseProtocolError, "protocol_error", "A phone may not send "+f.FrameType()+" here.")
		return false
	}
	return true
}

// refused reports a failed intake: a client error goes back as an error
// frame naming the report (the link goes on, and the phone drops the
// report, or keeps it to resend when the frame carries retry_after); a server fault closes the link so the phone retries after
// reconnecting (its report is not lost: it was never acknowledged).
func (c *conn) refused(err error, what string, about proto.Error) bool {
	if err == nil {
		return false
	}
	if pe, ok := problem.As(err); ok {
		about.Code, about.Message, about.Field, about.RetryAfter = string(pe.Code), what+": "+pe.Message, pe.Field, pe.RetryAfter
		c.answerError(about)
		return true
	}
	c.hub.log.Error("intake failed", "device", c.dev.Fingerprint, "frame", what, "id", about.ID, "client_id", about.ClientID, "err", err)
	c.closeWith(int(websocket.StatusInternalError), "server error")
	return true
}

// send queues a frame without ever blocking: a full queue means the phone
// reads too slowly, and it is closed to resync from the store.
func (c *conn) send(f proto.Frame) bool { return c.enqueue(f, proto.CloseTooSlow) }

// enqueue queues a frame, or closes the link with overflow (4008, or 4029
// for the answers to a flood) when the queue holds QueueLen frames or the
// frame would take it over QueueBytes. A frame always fits an empty queue.
func (c *conn) enqueue(f proto.Frame, overflow int) bool {
	data, err := proto.Encode(f)
	if err != nil {
		c.hub.log.Error("encode frame", "err", err)
		return false
	}
	c.qmu.Lock()
	if c.closed() {
		c.qmu.Unlock()
		return false
	}
	cfg := c.hub.cfg
	if len(c.queue) >= cfg.QueueLen || (len(c.queue) > 0 && c.queued+len(data) > cfg.QueueBytes) {
		c.qmu.Unlock()
		if overflow == proto.CloseFlood {
			c.failFlood()
		} else {
			c.closeWith(overflow, "too slow: queue full")
		}
		return false
	}
	c.queue = append(c.queue, data)
	c.queued += len(data)
	start := !c.writing
	c.writing = true
	c.qmu.Unlock()
	if start {
		c.hub.wg.Add(1)
		go c.writeLoop()
	}
	return true
}

// open puts the welcome ahead of whatever was queued while the link was
// being set up, and lets the writer run.
func (c *conn) open(welcome proto.Welcome) {
	data, err := proto.Encode(welcome)
	if err != nil {
		c.hub.log.Error("encode frame", "err", err)
		c.closeWith(int(websocket.StatusInternalError), "server error")
		return
	}
	c.qmu.Lock()
	c.queue = append([][]byte{data}, c.queue...)
	c.queued += len(data)
	c.qmu.Unlock()
	c.hub.wg.Add(1)
	go c.writeLoop() // writing is still true from newConn: this is the one writer
}

// writeLoop is the link's one writer: it runs while frames wait and ends
// when the queue is empty, so an idle phone costs no writer goroutine and
// no queue memory.
func (c *conn) writeLoop() {
	h := c.hub
	defer h.wg.Done()
	// The write timeout is one timer for the writer's run, not a context per
	// frame: the library keeps the context of the last write for as long as
	// the link lives.
	var stuck *time.Timer
	defer func() {
		if stuck != nil {
			stuck.Stop()
		}
	}()
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 || c.closed() {
			c.queue, c.queued, c.writing = nil, 0, false
			c.qmu.Unlock()
			return
		}
		data := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.queued -= len(data)
		c.qmu.Unlock()
		if stuck == nil {
			stuck = time.AfterFunc(h.cfg.WriteTimeout, c.cut)
		} else {
			stuck.Reset(h.cfg.WriteTimeout)
		}
		err := c.ws.Write(context.Background(), websocket.MessageText, data)
		stuck.Stop()
		if err != nil {
			c.end()
			c.qmu.Lock()
			c.queue, c.queued, c.writing = nil, 0, false
			c.qmu.Unlock()
			return
		}
	}
}

// cut ends a write that has waited WriteTimeout for the phone to read: the
// connection is closed under it, as the library does when a write's
// context ends.
func (c *conn) cut() {
	c.lost("a write waited " + c.hub.cfg.WriteTimeout.String() + " for the phone to read")
	if c.sock != nil {
		_ = c.sock.Close()
		return
	}
	_ = c.ws.CloseNow()
}

// pingOnce sends one ping and ends the link if no pong comes back in time;
// it runs on a goroutine of its own, which exists only for the round trip,
// and has the hub's pinger send the next.
func (c *conn) pingOnce() {
	if c.closed() {
		return
	}
	if l, ok := c.sock.(*linkIO); ok && l.onPong != nil {
		if sent, ok := c.pingOwn(l); sent || !ok {
			if ok {
				c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
			}
			return
		}
		if !l.unsynced.Load() { // a frame was being written: ping at the next turn
			c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.hub.cfg.PongTimeout)
	defer cancel()
	read := c.frames.Load()
	if err := c.ws.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			if c.heard(read) && !c.closed() {
				c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
				return
			}
			c.lost("no pong within " + c.hub.cfg.PongTimeout.String())
		}
		c.end()
		return
	}
	c.touch()
	c.hub.pings.after(c, jitter(c.hub.cfg.PingInterval))
}

// pingOwn pings through the link's connection and waits for the pong the
// reader takes (or the link's end): sent is false when no ping could be
// written between frames, ok false when the link ended or its phone did not
// answer within the pong timeout.
func (c *conn) pingOwn(l *linkIO) (sent, ok bool) {
	w := &pingWait{done: make(chan struct{})}
	c.ping.Store(w)
	defer c.ping.Store(nil)
	if c.closed() {
		return false, false
	}
	read := c.frames.Load()
	sent, err := l.ping(c.hub.cfg.PongTimeout)
	if err != nil {
		c.end()
		return false, false
	}
	if !sent {
		return false, true
	}
	t := time.NewTimer(c.hub.cfg.PongTimeout)
	defer t.Stop()
	select {
	case <-w.done:
		return true, !c.closed()
	case <-t.C:
		if c.heard(read) {
			return true, !c.closed() // the next ping asks again
		}
		c.lost("no pong within " + c.hub.cfg.PongTimeout.String())
		c.end()
		return true, false
	}
}

// fail sends an error frame and closes with code.
func (c *conn) fail(code int, errCode, msg string) {
	c.closeWithFrame(code, msg, &proto.Error{Code: errCode, Message: msg})
}

func (c *conn) closeWith(code int, reason string) { c.closeWithFrame(code, reason, nil) }

// closeWithFrame ends the link once: the close handshake can take seconds, so
// it runs on its own goroutine and never holds up the caller.
func (c *conn) closeWithFrame(code int, reason string, errFrame *proto.Error) {
	if !c.state.CompareAndSwap(linkOpen, linkClosing) {
		return
	}
	recount(c.sock)                      // no longer the device's one link, though open for the handshake
	reason = proto.CutBytes(reason, 120) // the close frame allows 123 bytes; never half a character
	// The operator's record of why the server ended a link: a phone that
	// does not read may never see the close frame (PROTOCOL.md, section 9).
	// A restart closes every link at once, so those lines are debug only.
	level := slog.LevelInfo
	if code == proto.CloseRestarting {
		level = slog.LevelDebug
	}
	c.hub.log.Log(context.Background(), level, "phone link closed by the server", "device", c.dev.Fingerprint, "code", code, "reason", reason)
	if l, ok := c.sock.(*linkIO); ok {
		l.stopAwaiting() // the close handshake reads on the goroutine below
	}
	c.hub.wg.Add(1)
	go func() {
		defer c.hub.wg.Done()
		if errFrame != nil {
			if data, err := proto.Encode(*errFrame); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = c.ws.Write(ctx, websocket.MessageText, data)
				cancel()
			}
		}
		_ = c.ws.Close(websocket.StatusCode(code), reason)
	}()
}

// heard says whether the phone proved itself alive since the reader had
// read read frames: a frame came in since, or the reader is not reading at
// all (it waits for the store to take a report, and a pong it would take is
// waiting behind), so a missing pong is the server's delay, not a silent
// phone's.
func (c *conn) heard(read uint32) bool {
	return c.frames.Load() != read || c.handling.Load()
}

// lost logs why the server is dropping a link it could not get through to
// (the phone answered no ping, or read none of a write), for the operator:
// there is no close handshake, and the phone only sees its connection end.
func (c *conn) lost(why string) {
	if c.closed() {
		return
	}
	c.hub.log.Info("phone link dropped by the server", "device", c.dev.Fingerprint, "reason", why)
}

// end drops a link whose network failed: there is nobody to say goodbye to.
// A close handshake already under way is left to finish on its own.
func (c *conn) end() {
	c.state.CompareAndSwap(linkOpen, linkCut)
	if c.state.Load() != linkClosing {
		c.ws.CloseNow()
	}
}

func (c *conn) closed() bool { return c.state.Load() != linkOpen }

// finish runs when the reader ends: the link is over.
func (c *conn) finish() {
	c.end()
	if w := c.ping.Load(); w != nil {
		w.end() // a ping waiting for its pong waits no more
	}
	c.hub.forget(c)
	c.hub.pings.forget(c)
	c.pumpMu.Lock()
	if c.paceTimer != nil {
		c.paceTimer.Stop()
	}
	if c.gapTimer != nil {
		c.gapTimer.Stop()
	}
	c.pumpMu.Unlock()
	if err := c.hub.devices.Seen(context.Background(), c.dev, time.Unix(0, c.lastSeen.Load())); err != nil {
		c.hub.log.Error("store last seen", "device", c.dev.Fingerprint, "err", err)
	}
}

// pump writes waiting jobs to the link while the window of un-acked sends
// has room: SMS first, then the jobs of its WhatsApp numbers and iMessage
// handles, each paced by its gap (agents.go).
func (c *conn) pump() {
	c.pumpMu.Lock()
	defer c.pumpMu.Unlock()
	c.owed = false // this pump fills whatever is free
	c.pumpSMS()
	c.pumpAgents()
}

// pumpSMS writes waiting SMS jobs; pumpMu held.
func (c *conn) pumpSMS() {
	for {
		room := c.hub.cfg.MaxInflight - len(c.inflight)
		if room <= 0 || c.closed() {
			return
		}
		// Priority jobs come back at every read until acked, so read as
		// many more as the link holds.
		limit := room + len(c.priority)
		jobs, err := c.hub.intake.Pending(context.Background(), c.dev, c.cursor, limit)
		if err != nil {
			c.hub.log.Error("load pending jobs", "device", c.dev.Fingerprint, "err", err)
			return
		}
		progress := false
		for _, j := range jobs {
			if j.Send == nil { // expired (the sweeper marks it), held or failed: not sent, and out of the queue's way
				if j.Seq != 0 {
					c.cursor = j.Seq
				}
				progress = true
				continue
			}
			if _, held := c.inflight[j.Send.ID]; held {
				continue // a priority job this link has (Seq 0: read again each time)
			}
			if len(c.inflight) >= c.hub.cfg.MaxInflight {
				return // the window is full: the next ack pumps again
			}
			if c.pace != nil {
				r := c.pace.Reserve()
				if d := r.Delay(); d > 0 {
					r.Cancel()
					if c.paceTimer == nil {
						c.paceTimer = time.AfterFunc(d, func() {
							c.pumpMu.Lock()
							c.paceTimer = nil
							c.pumpMu.Unlock()
							c.pump()
						})
					}
					return
				}
			}
			c.hub.noteDispatch(c.dev.ID, j.Seq)
			if !c.send(*j.Send) {
				return
			}
			c.take(j.Send.ID)
			if j.Seq != 0 {
				c.cursor = j.Seq
			} else {
				if c.priority == nil {
					c.priority = map[string]struct{}{}
				}
				c.priority[j.Send.ID] = struct{}{}
			}
			progress = true
		}
		// A short batch was the end of the queue. A full one may have been
		// expired jobs only, which filled no slot: read on, or the jobs
		// behind them would wait for the next send or link. One that moved
		// nothing (priority jobs this link has) would read the same again:
		// their acks pump again.
		c.queueEnd = len(jobs) < limit
		if c.queueEnd || !progress {
			return
		}
	}
}

// kick pumps for jobs just queued: the queue has jobs past its end again.
func (c *conn) kick() {
	c.pumpMu.Lock()
	c.queueEnd = false
	c.pumpMu.Unlock()
	c.pump()
}

// take puts a send written to the link in the window; pumpMu held.
func (c *conn) take(id string) {
	if c.inflight == nil {
		c.inflight = map[string]struct{}{}
	}
	c.inflight[id] = struct{}{}
}

// settle frees a send's place in the window; it reports whether the send
// was in the window. The answerer refills the places freed (refill).
func (c *conn) settle(id string) bool {
	c.pumpMu.Lock()
	_, was := c.inflight[id]
	delete(c.inflight, id)
	if len(c.inflight) == 0 {
		c.inflight = nil // an idle link holds no map
	}
	if c.priority != nil {
		delete(c.priority, id)
		if len(c.priority) == 0 {
			c.priority = nil
		}
	}
	c.owed = c.owed || was
	c.pumpMu.Unlock()
	return was
}

// refill writes jobs into the places of the window freed since the last
// pump, once half the window is free or no other answer waits (idle): a
// phone whose acks come in a stream has its window refilled in one read of
// the queue per half window instead of one read per ack, and still never
// holds fewer than half the window's jobs while it has a backlog. Answerer
// goroutine only.
func (c *conn) refill(idle bool) {
	c.pumpMu.Lock()
	// Once a read found the queue's end, only a kick (a new job) can
	// bring SMS jobs; WhatsApp and iMessage jobs are read on every refill.
	more := !c.queueEnd || len(c.lines) > 0
	due := c.owed && more && (idle || len(c.inflight) <= c.hub.cfg.MaxInflight/2)
	if due {
		c.owed = false
	}
	c.pumpMu.Unlock()
	if due {
		c.pump()
	}
}

// frameType is the type a frame names, "" when it names none.
func frameType(data []byte) string {
	var env struct {
		Type any `json:"type"`
	}
	_ = json.Unmarshal(data, &env)
	t, _ := env.Type.(string)
	return t
}

// frameProblem says in one sentence why a frame could not be decoded.
func frameProblem(err error) string {
	var typ *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		want, got := jsonKind(typ.Type.Kind()), typ.Value
		// A number that does not fit comes as "number <its digits>": never
		// repeat the digits, which may be most of a 64 KiB frame.
		if strings.HasPrefix(got, "number ") {
			if want == "number" {
				return fmt.Sprintf("%s is out of range.", typ.Field)
			}
			got = "number"
		}
		return fmt.Sprintf("%s must be a JSON %s, not %s.", typ.Field, want, echo(got))
	case errors.As(err, &syntax):
		return "the frame is not valid JSON."
	default:
		return "the frame must be a JSON object with a string type."
	}
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "number"
}
