package gateway

// A phone's link: its record, its life (registered after the hello, welcomed,
// then read until it ends) and its end (closed with a code, dropped, finished).

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	proto "github.com/simrelay/simrelay/android-protocol"
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
	hub  *Hub
	ws   *websocket.Conn
	sock net.Conn // the connection under ws; nil if unknown
	// fp is the device's fingerprint, set by newConn and never written
	// again: whoever closes the link reads it (closeBegun, lost), and a
	// close can come before the link is registered (Shutdown, the hello's
	// timeout) while the set-up goroutine writes dev.
	fp string
	// dev is the device as the upgrade's token check found it, then as its
	// hello stored it: written by the set-up goroutine (run) alone, before
	// the link is registered, and never after. Any other goroutine reads it
	// only once it found c registered (under hub.mu, which register took
	// after the write); one that may come earlier reads fp.
	dev   store.Device
	token string // the device token of the upgrade, checked again once registered, then dropped
	// helloStored says the link's hello was stored (and with it the
	// device's last seen): only then does the link's end store its last
	// seen. A link refused at its hello stores nothing of the device
	// (PROTOCOL.md section 16.1), though its token passed the upgrade: it
	// may have been revoked since, or the device disabled. Written by the
	// set-up goroutine (hello) before the reader starts; read by whichever
	// of the two ends the link (finish).
	helloStored bool
	// told is the last Disconnect that found c registered (the device
	// changed since every older link's look); guarded by hub.mu. The link
	// c displaced is closed as it says (giveBack, or c's success).
	told *refusal

	qmu     sync.Mutex
	queue   [][]byte // frames waiting for the phone, at most QueueLen; guarded by qmu
	queued  int      // bytes in queue, at most QueueBytes; guarded by qmu
	writing bool     // the writer goroutine is running (or held until the welcome); guarded by qmu

	pingSlot           int                      // 1 + the pinger's slot of the next ping, 0 when none; guarded by hub.pings.mu
	pingPrev, pingNext *conn                    // the other links of that slot; guarded by hub.pings.mu
	ping               atomic.Pointer[pingWait] // the ping waiting for its pong; nil between pings

	state     atomic.Int32  // linkOpen until the link ends, once
	closedAt  atomic.Int64  // unix nanoseconds the link stopped being open (a close handshake begun, or cut): offline from then
	toldEnded atomic.Bool   // the cluster heard the link ended (ended)
	frames    atomic.Uint32 // frames read from the phone, counted (wrapping) to tell a live phone from a silent one (heard)
	handling  atomic.Bool   // the reader is taking a frame, not reading: it may wait on the store
	lastSeen  atomic.Int64  // unix nanoseconds of the last frame or pong
	// quietSince is when the silence the pings bound began (mono): the last
	// frame or pong, or the reader reading again after a frame it took.
	quietSince atomic.Int64
	seenSaved  atomic.Int64 // unix nanoseconds of the last seen storeSeen stored

	closeStored atomic.Pointer[chan struct{}] // closed once the last seen of the link's end is stored (seenStored); nil until asked for

	flood   *rate.Limiter // what the phone sends unasked (flood.go), from its first such frame; guarded by floodMu
	helloAt int64         // unix nanoseconds the hello came, the link's first unasked frame; set by the reader before any charge
	floodMu sync.Mutex    // the reader and the answerer both charge
	pings   *rate.Limiter // the phone's own WebSocket pings (flood.go), from its first; guarded by floodMu

	room      chan struct{} // a token per frame waiting for its answer (answers.go); made by the reader
	amu       sync.Mutex
	answers   []answer // answers waiting, in the order of the frames; guarded by amu
	answering bool     // the answerer goroutine is running; guarded by amu

	// cfgMu takes the link's settings one change at a time: each read of
	// the device and what it gives the link (control.go, settled), from
	// the link's second look on.
	cfgMu sync.Mutex

	// kmu guards the kicks waiting for the link's pump goroutine (kick,
	// pumpKicks); taken after pumpMu, never before it.
	kmu      sync.Mutex
	kicked   bool // a kick came that no pump has taken yet; guarded by kmu
	released bool // one of those kicks was a release; guarded by kmu
	kicking  bool // the pump goroutine runs; guarded by kmu
	// nextPace is the pace (sms_per_minute) the link's second look or a
	// settings change (Hub.Pace, Hub.Refresh) gave it and no pump has
	// taken yet, -1 when none: they do not wait for pumpMu, which a
	// failover's hold keeps (HoldDevice), and the next pump takes it
	// before it sends (takePace). Written under cfgMu, in the order the
	// store was read (settled): the last written is the newest.
	nextPace atomic.Int64

	pumpMu    sync.Mutex          // serialises pumps, which read the store
	inflight  map[string]struct{} // sends written to this link, not yet acked (nil when none); guarded by pumpMu
	priority  map[string]struct{} // those of them with a priority (nil when none); guarded by pumpMu
	cursor    uint64              // seq of the last job this link took from the queue; guarded by pumpMu
	owed      bool                // places freed in the window since the last pump (refill); guarded by pumpMu
	queueEnd  bool                // the last read of the SMS queue reached its end, and no kick came since; guarded by pumpMu
	pace      *rate.Limiter       // the device's pace (pace.go); nil: no pacing; guarded by pumpMu
	paceEnded bool                // the link ended: it takes no pace; guarded by pumpMu
	paceTimer *time.Timer         // a pump waiting for the pace; guarded by pumpMu
	lines     []line              // WhatsApp numbers and iMessage handles of the hello (agents.go); guarded by pumpMu
	gapTimer  *time.Timer         // a pump waiting for a number's gap; guarded by pumpMu
	gapDue    time.Time           // when gapTimer fires; guarded by pumpMu

	epoch    atomic.Uint64 // the link's fencing epoch in a cluster (links.go); 0 on one node or until claimed
	fencedBy atomic.Uint64 // the newest epoch of the device heard of from other nodes

	gmu     sync.Mutex
	running int // the link's goroutines counted in hub.wg that have not ended (spawn); guarded by gmu
}

// spawn runs f on a goroutine of the link, counted in the hub's wg, and
// says whether it did. One goroutine of the link starts another while it
// runs (the count is above zero), at any time. Once all of them ended (a
// closer that decided to close the link while its reader ended on its
// own, a kick that found it open a moment before), a new one is counted
// from zero, which WaitGroup allows only before a Wait: so it starts only
// until Shutdown waits (hub.waiting), and is refused after, when the
// caller does inline what it needs of it (or nothing: the link is over).
// Without that, a close or a write could start a goroutine as Shutdown's
// Wait returned, or after: Add racing Wait, and a goroutine that outlived
// Shutdown and wrote to a store being closed.
func (c *conn) spawn(k task, f func()) bool {
	h := c.hub
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if c.running == 0 {
		// Counted from zero: under the hub's lock, where Shutdown sets
		// waiting before it waits.
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.waiting {
			return false
		}
	}
	// Otherwise the count is above zero: c.running's goroutines have not
	// called Done, and Add may come at any time.
	c.launch(k, f)
	return true
}

// launch counts one more goroutine of the link, of kind k, in the hub's
// wg and the link's and the hub's counts, and runs f on it; exit undoes
// the counts as it ends. Its caller holds gmu (spawn), or c cannot be
// found yet (accept, which holds the hub's lock as it checks draining):
// either way, a Wait on the hub's wg has not begun or waits on the link's
// goroutines already counted.
func (c *conn) launch(k task, f func()) {
	c.hub.wg.Add(1)
	c.running++
	c.hub.tasks[k].Add(1)
	go func() {
		defer c.exit(k)
		f()
	}()
}

// exit ends one of the link's goroutines, of kind k (launch).
func (c *conn) exit(k task) {
	c.hub.tasks[k].Add(-1)
	c.gmu.Lock()
	c.running--
	c.gmu.Unlock()
	c.hub.wg.Done()
}

func newConn(h *Hub, ws *websocket.Conn, sock net.Conn, dev store.Device, token string) *conn {
	// writing starts true: the writer is held until open sends the welcome.
	c := &conn{hub: h, ws: ws, sock: sock, fp: dev.Fingerprint, dev: dev, token: token, writing: true}
	c.nextPace.Store(-1)
	if l, ok := sock.(*linkIO); ok {
		l.onPong = c.ponged // the reader takes pongs between frames (awaitFrame)
	}
	c.touch()
	return c
}

// touch records a frame or pong as the link's activity while it is open:
// one taken once the server decided to close the link (its close handshake
// under way) or once the link was cut comes after the device went offline
// (closedSince) and does not count. The time is read before the check, so
// one that races the decision is still no later than it.
func (c *conn) touch() {
	c.quiet()
	now := c.hub.now().UnixNano()
	if c.closedAt.Load() == 0 {
		c.lastSeen.Store(now)
	}
}

// run is the link's set-up goroutine: the hello, the registration and its
// second look, the welcome and the first pump; it then hands the link to a
// reader goroutine of its own (reader), which takes frames until it ends.
// It runs on a goroutine of the link (launch, from accept).
func (c *conn) run() {
	h := c.hub
	if !c.hello() {
		c.finish()
		return
	}
	// The pace as the hello read the device, before the link can be
	// found: a send queued while the link is under its second look pumps
	// jobs behind the welcome, and they are paced too.
	c.setPace(c.dev.SMSPerMinute)
	old, ok := h.register(c)
	if !ok {
		c.closeWith(proto.CloseRestarting, "server restarting")
		if h.presence != nil {
			h.presence.Down(c.dev) // its hello reported it online
		}
		c.finish()
		return
	}
	// The token and status were checked before the upgrade; a re-registration,
	// disable or delete since then found no registered link to close. Now
	// that this link is registered, every later change reaches it, so one
	// more look closes the gap. Only a link that passes it replaces the old
	// one: a stale link must not knock the phone's real link off.
	//
	// The look reads the device, whose pace the link's next pump takes
	// (nextPace), in turn with the settings changes that find it
	// registered (settled): a change's pace set while the look went on,
	// read after it, is not undone by the look's older read. The look
	// does not wait for a failover's hold of the device (HoldDevice keeps
	// pumpMu), nor then does a change waiting for its turn.
	c.cfgMu.Lock()
	fresh, refused := c.stillAllowed()
	if refused == nil {
		c.nextPace.Store(int64(fresh.SMSPerMinute))
	}
	c.cfgMu.Unlock()
	if refused != nil {
		h.giveBack(c, old, refused)
		if h.presence != nil {
			h.presence.Down(c.dev) // its hello reported it online
		}
		c.finish()
		return
	}
	if !c.claim() {
		h.giveBack(c, old, &refusal{})
		if h.presence != nil {
			h.presence.Down(c.dev)
		}
		c.finish()
		return
	}
	if old != nil {
		code, reason := proto.CloseReplaced, replacedReason
		if told := h.toldBy(c); told != nil {
			// The device changed while c was looked at: the older link's
			// token or status is no longer good either.
			code, reason = told.code, told.reason
		}
		old.closeWith(code, reason)
	}
	uncount(c.sock) // before the welcome: the phone's next connection finds its place free
	// The phone's silence counts from its welcome: the set-up's store work
	// is the server's, not the phone's.
	c.quiet()
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
	c.spawn(taskReader, c.reader) // run has not ended: never refused
}

// reader reads the phone's frames until the link ends. The link ends
// (finish), its last seen stored, before it is unregistered: until then a
// Disconnect (a request that answers with the device next) finds it and
// waits for that last seen, and a node that reads the device offline from
// the link's end reads it, as when the server closes a link (closeBegun).
func (c *conn) reader() {
	defer c.hub.unregister(c)
	defer c.finish()
	c.readLoop()
}

const timeLayout = "2006-01-02T15:04:05.000Z"

// fail sends an error frame and closes with code.
func (c *conn) fail(code int, errCode, msg string) {
	c.closeWithFrame(code, msg, &proto.Error{Code: errCode, Message: msg})
}

func (c *conn) closeWith(code int, reason string) <-chan struct{} {
	return c.closeWithFrame(code, reason, nil)
}

// noWait is a channel closed from the start: nothing to wait for.
var noWait = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// closeWithFrame ends the link once: the close handshake can take seconds, so
// it runs on its own goroutine and never holds up the caller. The channel
// it returns is closed once the device's last seen is stored (at once when
// there is none to store), for a caller that answers a request next
// (Hub.Disconnect); a later close gets the first one's, so that it too
// answers with the last seen stored, and a close of a link the network
// cut gets the one its end closes once it stored the last seen (finish).
func (c *conn) closeWithFrame(code int, reason string, errFrame *proto.Error) <-chan struct{} {
	stored, won := c.beginClose()
	if won {
		c.closeBegun(code, reason, errFrame, stored)
	}
	return stored
}

// beginClose decides that the server closes the link: the link is closed
// (c.closed) from now, though its close frame is not sent yet. It returns
// the channel closed once the link's last seen is stored, and whether this
// close decided; only then must closeBegun follow, with that channel.
// A caller may decide under the hub's lock (giveBack), so that no pump
// finds the link open once the lock is released.
func (c *conn) beginClose() (stored chan struct{}, won bool) {
	c.markClosed() // offline from now, though the handshake may wait seconds on a phone that does not read
	// Every close takes the channel before it tries the state: the one
	// that wins it closes that channel, and one that loses to a close
	// waits on it; the end of a link cut instead closes it once it stored
	// its last seen (finish).
	stored = c.seenStored()
	return stored, c.state.CompareAndSwap(linkOpen, linkClosing)
}

// seenStored is the channel closed once the link's last seen is stored
// as it ends, made by the first to ask for it.
func (c *conn) seenStored() chan struct{} {
	ch := make(chan struct{})
	if c.closeStored.CompareAndSwap(nil, &ch) {
		return ch
	}
	return *c.closeStored.Load()
}

// closeBegun sends the close a beginClose decided, stores the device's
// last seen and closes stored once it is.
func (c *conn) closeBegun(code int, reason string, errFrame *proto.Error, stored chan struct{}) {
	recount(c.sock)                      // no longer the device's one link, though open for the handshake
	reason = proto.CutBytes(reason, 120) // the close frame allows 123 bytes; never half a character
	// The operator's record of why the server ended a link: a phone that
	// does not read may never see the close frame (PROTOCOL.md, section 6).
	// A restart closes every link at once, so those lines are debug only.
	level := slog.LevelInfo
	if code == proto.CloseRestarting {
		level = slog.LevelDebug
	}
	c.hub.log.Log(context.Background(), level, "phone link closed by the server", "device", c.fp, "code", code, "reason", reason)
	if l, ok := c.sock.(*linkIO); ok {
		l.stopAwaiting() // the close handshake reads on the goroutine below
	}
	// The device is offline from now: its last seen is stored now too, not
	// once the handshake is over, so that the API and the console, which
	// show an offline device's stored last seen, do not show the one its
	// hello stored meanwhile; and other nodes hear the link ended now. Both
	// are the registered link's only: a link replaced or refused is not the
	// device's (the device is online on the other, or never was). A restart
	// ends every link within the shutdown anyway, and a store out of reach
	// (1013) would not take the last seen: finish stores theirs. The writes
	// run on a goroutine of their own: they must not hold up the close
	// frame, least of all while the database does not answer (a close with
	// 1013). The last seen goes first: a node that reads the device offline
	// from the link's end reads it.
	mine := c.hub.lookup(c.fp) == c
	seen := mine && code != proto.CloseRestarting && code != proto.CloseTryAgainLater
	after := func() {
		if seen {
			c.storeSeen()
		}
		close(stored)
		if mine {
			c.ended()
		}
	}
	if !c.spawn(taskEnd, after) {
		after() // the link is over and the hub stopped: rare, and nobody waits on a close
	}
	if !c.spawn(taskClose, func() {
		if errFrame != nil {
			if data, err := proto.Encode(*errFrame); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = c.ws.Write(ctx, websocket.MessageText, data)
				cancel()
			}
		}
		_ = c.ws.Close(websocket.StatusCode(code), reason)
	}) {
		// No goroutine is left to hold the close handshake: its reader
		// ended on its own (the close left the socket open for it).
		_ = c.ws.CloseNow()
	}
}

// lost logs why the server is dropping a link it could not get through to
// (the phone answered no ping, or read none of a write), for the operator:
// there is no close handshake, and the phone only sees its connection end.
func (c *conn) lost(why string) {
	if c.closed() {
		return
	}
	c.hub.log.Info("phone link dropped by the server", "device", c.fp, "reason", why)
}

// end drops a link whose network failed: there is nobody to say goodbye to.
// A close handshake already under way is left to finish on its own.
func (c *conn) end() {
	c.markClosed()
	c.state.CompareAndSwap(linkOpen, linkCut)
	if c.state.Load() != linkClosing {
		c.ws.CloseNow()
	}
}

func (c *conn) closed() bool { return c.state.Load() != linkOpen }

// markClosed records when the link stopped being open, the first time
// only; it comes before the state's change, so a closed link always has
// its time (closedSince).
func (c *conn) markClosed() { c.closedAt.CompareAndSwap(0, c.hub.now().UnixNano()) }

// finish runs when the reader ends: the link is over.
func (c *conn) finish() {
	c.end()
	if w := c.ping.Load(); w != nil {
		w.end() // a ping waiting for its pong waits no more
	}
	c.hub.forget(c)
	c.hub.pings.forget(c)
	c.pumpMu.Lock()
	c.endPace()
	if c.gapTimer != nil {
		c.gapTimer.Stop()
	}
	c.pumpMu.Unlock()
	if c.helloStored {
		c.storeSeen()
	}
	if c.state.Load() == linkCut {
		// Nobody else stores a cut link's last seen: a Disconnect that
		// found the link still registered waits for this one.
		close(c.seenStored())
	}
}

// seen is when the link last carried anything while it was open: a frame
// or pong taken during the close handshake comes after the device went
// offline (closedSince) and does not count (touch records none; the
// clamp keeps one that raced the decision on a clock stepped back).
func (c *conn) seen() time.Time {
	at := c.lastSeen.Load()
	if closed := c.closedAt.Load(); closed != 0 && closed < at {
		at = closed
	}
	return time.Unix(0, at).UTC()
}

// storeSeen stores the link's last seen as the device's, unless it
// stored that one already: a link the server closed stored it at the
// decision, and its end (finish) writes the device again only for a later
// one (a frame taken as the decision was made), so that a close costs one
// write, as an end does. Those are its only two calls, so a plain store
// of the time does: the second skips a time the first stored, or, run
// beside it, writes too, harmlessly (Seen keeps the later time).
func (c *conn) storeSeen() {
	at := c.seen()
	if at.UnixNano() <= c.seenSaved.Load() {
		return
	}
	if err := c.hub.devices.Seen(context.Background(), c.dev, at); err != nil {
		c.hub.seenFault(c.dev.Fingerprint, err)
		return
	}
	c.seenSaved.Store(at.UnixNano())
}
