package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/simrelay/simrelay/internal/logspacing"
	"github.com/simrelay/simrelay/internal/redact"
)

// Defaults, and why.
const (
	// DefaultPrefix begins every subject; a server's subjects go on with
	// its cluster's id (Prefix).
	DefaultPrefix = "simrelay"
	// ClusterIDSecret names the store secret (store.Backend.Secret) that is
	// a cluster's id on the bus, and ClusterIDSize its size in bytes: 64
	// random bits, made once by the first node of a database.
	ClusterIDSecret = "bus-cluster-id"
	ClusterIDSize   = 8
	// DefaultConnectTimeout bounds the first connection at start-up: a
	// node that cannot reach its bus refuses to start rather than run deaf.
	DefaultConnectTimeout = 10 * time.Second
	// reconnectWait is the pause between reconnection attempts once
	// connected; the client tries forever, and meanwhile /readyz says
	// the bus is down.
	reconnectWait = time.Second
	// reconnectBuffer is what the client keeps of messages published
	// while it reconnects (8 MiB, the client's default). Past it
	// Publish fails and the signal is dropped: each consumer's sweep
	// covers it.
	reconnectBuffer = 8 << 20
	// readyTimeout bounds a readiness round trip that has no deadline of its own.
	readyTimeout = 2 * time.Second
	// writeTimeout bounds one write to the server's socket. A server cut
	// off without a reset (a partition, its host powered off) reads
	// nothing; once the connection's buffers are full a write waits, under
	// the client's lock, and the bus's sender with it (Publish queues
	// meanwhile, queueSize); the signals wait: a phone link's registration
	// (which tells the other nodes), a disconnect's request, a key
	// rotation. Past this the connection counts as lost and
	// the client reconnects, keeping what is published meanwhile
	// (reconnectBuffer). The client's own default is a minute.
	writeTimeout = 2 * time.Second
	// pingEvery and maxPingsOut notice a server that went silent while
	// the node has little to write (its writes then fit the connection's
	// buffers, and writeTimeout never fires): a ping every pingEvery, and
	// the connection counts as lost when maxPingsOut of them wait unanswered,
	// so within 15 s. Until then the node hears nothing and does not know
	// it: its live views miss events without reloading (Live reloads them on
	// the reconnection), and its log says nothing of a bus down. The
	// client's defaults (2 minutes, 2) took 4 to 6 minutes.
	pingEvery   = 5 * time.Second
	maxPingsOut = 2
	// dropLogEvery spaces the lines of signals dropped: once the
	// reconnection buffer is full every publish fails, hundreds a second
	// under traffic (kicks, live events, the census), and a line each would
	// bury everything else the node says.
	dropLogEvery = 10 * time.Second
	// closeWait bounds how long Close waits for the handlers of messages
	// heard that are still running (each must not block for long anyway).
	closeWait = time.Second
	// flushWait bounds how long Close spends sending what is queued and
	// buffered, and leaveWait how long it waits for the client to leave
	// the server after that: the client's own Close waits for its lock,
	// which a reconnection's handshake with a silent server holds for the
	// connect timeout. Past leaveWait Close returns, logged, and the
	// client leaves once its handshake ends.
	flushWait = time.Second
	leaveWait = time.Second
	// queueSize and queueBytes bound the signals that Publish hands to
	// the bus's sender, by count and by bytes: the sender waits on the
	// client's lock, which a reconnection's handshake with a server that
	// accepted the connection and stays silent holds for the connect
	// timeout (10 s), and a write to a server that stopped reading for
	// writeTimeout. A thousand signals cover several hundred sends
	// meanwhile; 8 MiB, a thousand kick batches or large live events (most
	// are under a kilobyte, but an inbound message of 10,000 characters
	// written out in JSON escapes is some 60 KB: a thousand of those would
	// hold 60 MB). Past either a signal is dropped, logged as one dropped
	// by the client. The console's live events (Live) have no queue of
	// their own: they join this one.
	queueSize  = 1024
	queueBytes = 8 << 20
)

// errQueueFull is why Publish drops a signal while the sender waits.
var errQueueFull = errors.New("the queue to the bus is full")

// Config says how a node joins the bus.
type Config struct {
	// URL is one or more NATS servers, comma-separated:
	// nats://host:port[,nats://host:port]. Credentials may be in the URL.
	URL string
	// Node is this node's name, unique in the cluster; it names the NATS
	// connection, so the server's monitoring shows which node is which.
	Node string
	// Prefix begins every subject (default DefaultPrefix). A server gives
	// its cluster's (Prefix), so that clusters sharing a NATS server or
	// account do not hear each other.
	Prefix string
	// ConnectTimeout bounds the first connection (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	Logger         *slog.Logger
}

// Validate checks the configuration without connecting.
func (c Config) Validate() error {
	if strings.TrimSpace(c.URL) == "" {
		return errors.New("no NATS server: want nats://host:port")
	}
	servers := strings.Split(c.URL, ",")
	for i, s := range servers {
		s = strings.TrimSpace(s)
		if s == "" {
			return errors.New("an empty server in the list: want nats://host:port[,nats://host:port]")
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls") {
			// A comma splits the list wherever it is, as the NATS client
			// splits it: one in a user name or password ends the server
			// there, and the part before it holds the start of the secret.
			// Such a server, whose user info ends in a later part (the
			// parts up to the next that starts a URL), is shown whole, masked.
			whole := s
			for _, next := range servers[i+1:] {
				if strings.Contains(next, "://") {
					break
				}
				whole += "," + next
			}
			if strings.Contains(whole[len(s):], "@") {
				return fmt.Errorf("%q: a comma separates servers: write one in a user name or password as %%2C", redact.Userinfo(whole))
			}
			return fmt.Errorf("%q: want nats://host:port or tls://host:port", redact.Userinfo(s))
		}
	}
	if !validNodeName(c.Node) {
		return fmt.Errorf("node name %q: want a name of 1 to %d bytes without spaces, dots, * or >", c.Node, maxNodeName)
	}
	if c.Prefix != "" && strings.ContainsAny(c.Prefix, " \t\r\n*>") {
		return fmt.Errorf("subject prefix %q: no spaces, * or >", c.Prefix)
	}
	return nil
}

// Prefix is the subject prefix of the cluster whose database st is:
// "simrelay.<id>", the id being random bytes the first node made in the
// database (ClusterIDSecret), in hex. Every node of one database says and
// hears the same subjects; a node of another database (another cluster on
// the same NATS server or account) has other ones, and hears none of
// these. The id is no secret: it only tells clusters apart, and whoever
// reads the server's subjects sees it.
func Prefix(st interface {
	Secret(name string, size int) ([]byte, error)
}) (string, error) {
	id, err := st.Secret(ClusterIDSecret, ClusterIDSize)
	if err != nil {
		return "", fmt.Errorf("bus: the cluster's id: %w", err)
	}
	return DefaultPrefix + "." + hex.EncodeToString(id), nil
}

// Message is what a subscriber hears.
type Message struct {
	// Topic is the subject without the prefix and its dot.
	Topic string
	Data  []byte
}

// Bus is one node's connection to the others.
type Bus struct {
	nc *nats.Conn
	// link is whether the client is connected, as the client's handlers
	// last said: read without the client's lock (Connected).
	link   *linkState
	node   string
	prefix string
	log    *slog.Logger

	mu sync.Mutex
	// closing is set by Close: no handler of a message heard starts after
	// it; handlers counts those running, for Close to wait for.
	closing   bool // guarded by mu
	handlers  sync.WaitGroup
	closeWait time.Duration // closeWait; a test's own

	// out is the signals published that the sender (send) has not handed
	// to the client yet, and marks (Ready's); queued is their bytes.
	// Close sets stopped, then closes stop, and the sender hands on what
	// is queued until flushBy, then closes sent; Close drops what it left.
	// A Publish holds admit's read lock from its look at stopped until its
	// signal is queued, and Close sets stopped under its write lock: no
	// signal joins the queue once Close set it, so none waits there after
	// the sender stopped without Close seeing it.
	out     chan outgoing
	queued  atomic.Int64
	admit   sync.RWMutex
	stopped bool // guarded by admit
	stop    chan struct{}
	flushBy time.Time // set before stop is closed
	sent    chan struct{}
	once    sync.Once // Close's

	drops logspacing.Spacer // spaces Publish's lines of signals dropped
}

// outgoing is one signal for the sender to hand to the client, or a mark:
// reached set, closed when the sender gets to it. tally (nil: none) counts
// the signal if it is dropped.
type outgoing struct {
	subject string
	data    []byte
	tally   *atomic.Uint64
	reached chan struct{}
}

// Connect joins the bus. It fails when no server answers within the
// connect timeout; once connected it reconnects by itself for ever.
func Connect(ctx context.Context, cfg Config) (*Bus, error) { return connect(ctx, cfg, pingEvery) }

// connect is Connect with the client's pings every pings (pingEvery; a
// test's own).
func connect(ctx context.Context, cfg Config, pings time.Duration) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// link follows the client's own handlers (linkState).
	// Connect returns once the connect handler ran (first), so that
	// Connected says true from the start.
	link, first := new(linkState), make(chan struct{})
	firstOnce := sync.OnceFunc(func() { close(first) })
	opts := []nats.Option{
		nats.Name("simrelay " + cfg.Node),
		nats.ConnectHandler(func(*nats.Conn) { link.connected(); firstOnce() }),
		nats.ClosedHandler(func(*nats.Conn) { link.lost() }),
		nats.NoEcho(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectBufSize(reconnectBuffer),
		nats.Timeout(cfg.ConnectTimeout),
		nats.FlusherTimeout(writeTimeout),
		nats.PingInterval(pings),
		nats.MaxPingsOutstanding(maxPingsOut),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			link.lost()
			if nc.IsClosed() {
				return // the node's own Close, at shutdown
			}
			log.Warn("bus disconnected; signals to other nodes wait for the reconnection", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			link.reconnected()
			log.Info("bus reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			subject := ""
			if s != nil {
				subject = s.Subject
			}
			log.Error("bus", "subject", subject, "err", err)
		}),
	}
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(cfg.URL, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("bus: connect to %s: %w", redactList(cfg.URL), r.err)
		}
		select {
		case <-first:
		case <-ctx.Done():
			r.nc.Close()
			return nil, ctx.Err()
		}
		b := &Bus{
			nc: r.nc, link: link, node: cfg.Node, prefix: cfg.Prefix, log: log, closeWait: closeWait,
			out: make(chan outgoing, queueSize), stop: make(chan struct{}), sent: make(chan struct{}),
		}
		go b.send()
		return b, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Node is this node's name.
func (b *Bus) Node() string { return b.node }

// Publish sends data to every other node subscribed to topic. It never
// waits: the signal joins the bus's queue (queueSize, queueBytes), which
// one goroutine hands to the NATS client in order, and it is dropped with
// a log line (at most one every dropLogEvery, counting those left out)
// when the queue is full, the bus closed or the client's reconnection
// buffer full. The queue keeps data until it is sent: the caller must not
// change it afterwards.
func (b *Bus) Publish(topic string, data []byte) { b.publish(topic, data, nil) }

// publish is Publish, adding one to tally (nil: nothing) when the signal
// is dropped, now, by the sender or at Close.
func (b *Bus) publish(topic string, data []byte, tally *atomic.Uint64) {
	if err := b.enqueue(outgoing{subject: b.prefix + "." + topic, data: data, tally: tally}); err != nil {
		b.dropped(topic, tally, err)
	}
}

// enqueue queues m for the sender, or says why not: the bus closed, or
// the queue full.
func (b *Bus) enqueue(m outgoing) error {
	b.admit.RLock()
	defer b.admit.RUnlock()
	if b.stopped {
		return nats.ErrConnectionClosed
	}
	n := int64(len(m.data))
	if b.queued.Add(n) > queueBytes {
		b.queued.Add(-n)
		return errQueueFull
	}
	select {
	case b.out <- m:
		return nil
	default:
		b.queued.Add(-n)
		return errQueueFull
	}
}

// dropped counts a signal dropped in tally (nil: nowhere) and logs it, at
// most a line every dropLogEvery.
func (b *Bus) dropped(topic string, tally *atomic.Uint64, err error) {
	if tally != nil {
		tally.Add(1)
	}
	if suppressed, ok := b.drops.Due(time.Now(), dropLogEvery); ok {
		b.log.Warn("bus: signal dropped", "topic", topic, "err", err, "suppressed", suppressed)
	}
}

// send hands the queued signals to the client, one at a time in order,
// until Close; then what is still queued until flushBy, and none after it
// (Close drops them). Handing one on waits while the client's lock is
// held: by a reconnection's handshake with a silent server (up to the
// connect timeout), by a write to a server that stopped reading (up to
// writeTimeout). Only the sender waits then; the client buffers what it
// is handed while it reconnects (reconnectBuffer).
func (b *Bus) send() {
	defer close(b.sent)
	for {
		// Close first: with signals queued as well, a select would take
		// either, and hand them on past flushBy.
		select {
		case <-b.stop:
			for time.Now().Before(b.flushBy) {
				select {
				case m := <-b.out:
					b.hand(m)
				default:
					return
				}
			}
			return
		default:
		}
		select {
		case m := <-b.out:
			b.hand(m)
		case <-b.stop:
		}
	}
}

// hand gives one signal to the client, or closes a mark.
func (b *Bus) hand(m outgoing) {
	if m.reached != nil {
		close(m.reached)
		return
	}
	b.queued.Add(-int64(len(m.data)))
	if err := b.nc.Publish(m.subject, m.data); err != nil {
		b.dropped(m.subject[len(b.prefix)+1:], m.tally, err)
	}
}

// Subscribe calls fn with every message of topic (which may end in the
// NATS wildcards * or >) published by another node. fn runs on one
// goroutine per subscription, in the order messages arrived; it must not
// block for long, or the client drops messages of this subscription
// (logged) once its pending buffer is full. Close waits for a call under
// way, and none starts after Close began.
func (b *Bus) Subscribe(topic string, fn func(Message)) error {
	strip := len(b.prefix) + 1
	_, err := b.nc.Subscribe(b.prefix+"."+topic, func(m *nats.Msg) {
		if !b.enter() {
			return
		}
		defer b.handlers.Done()
		fn(Message{Topic: m.Subject[strip:], Data: m.Data})
	})
	if err != nil {
		return fmt.Errorf("bus: subscribe %s: %w", topic, err)
	}
	return nil
}

// Ready answers nil when the bus is connected and a round trip to the
// server completes within ctx (within readyTimeout when ctx has no
// deadline), after what was published before it: those signals reached
// the server when it answers nil.
func (b *Bus) Ready(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readyTimeout)
		defer cancel()
	}
	mark := outgoing{reached: make(chan struct{})}
	select {
	case b.out <- mark:
	case <-b.stop:
		return fmt.Errorf("bus: %w", nats.ErrConnectionClosed)
	case <-ctx.Done():
		return fmt.Errorf("bus: signals queued: %w", ctx.Err())
	}
	select {
	case <-mark.reached:
	case <-b.sent:
		return fmt.Errorf("bus: %w", nats.ErrConnectionClosed)
	case <-ctx.Done():
		return fmt.Errorf("bus: signals queued: %w", ctx.Err())
	}
	// The client's lock, held by a reconnection's handshake with a silent
	// server for the connect timeout, does not hold the answer past ctx.
	answer := make(chan error, 1)
	go func() {
		if !b.nc.IsConnected() {
			answer <- fmt.Errorf("bus: %s", strings.ToLower(b.nc.Status().String()))
			return
		}
		if err := b.nc.FlushWithContext(ctx); err != nil {
			answer <- fmt.Errorf("bus: %w", err)
			return
		}
		answer <- nil
	}()
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return fmt.Errorf("bus: the client is busy: %w", ctx.Err())
	}
}

// Connected says whether the client is connected to a server, as its
// connect, disconnect, reconnect and close handlers last said (they run a
// moment after the event; a connect handler run after a disconnection
// says nothing, linkState); unlike Ready it sends nothing. It never waits
// for the client's lock, which a reconnection's handshake with a silent
// server holds for the connect timeout: the node's beat asks it.
func (b *Bus) Connected() bool { return b.link.up.Load() }

// linkState is whether the client is connected, as its handlers say: its
// one dispatcher runs them in the order the client queued them, which is
// not always the order of the events. Connect queues the connect handler
// as it returns, after the handshake; a connection that ends at once (a
// server that hangs up right after the handshake) may have its disconnect
// handler queued before it by the client's reader. The connect handler
// says nothing then: the client is reconnecting, and the reconnect
// handler says when it is back.
type linkState struct {
	up atomic.Bool
	// wasLost is set by the first disconnect or close handler; only
	// the dispatcher's goroutine reads and writes it.
	wasLost bool
	// reconnects counts the reconnect handlers run: the client's own count
	// (its Stats) is read under its lock, which a reconnection's handshake
	// with a silent server holds for the connect timeout.
	reconnects atomic.Uint64
}

// connected is the connect handler's: the first connection made.
func (l *linkState) connected() {
	if !l.wasLost {
		l.up.Store(true)
	}
}

// reconnected is the reconnect handler's.
func (l *linkState) reconnected() {
	l.reconnects.Add(1)
	l.up.Store(true)
}

// lost is the disconnect and close handlers'.
func (l *linkState) lost() {
	l.wasLost = true
	l.up.Store(false)
}

// enter counts a handler of a message heard that starts; false once Close
// began (the handler is not run). The caller calls handlers.Done when it
// returns.
func (b *Bus) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	b.handlers.Add(1)
	return true
}

// Close stops handing messages heard to their handlers, waits for those
// running (within closeWait, logged past it), sends what is queued and
// buffered (within flushWait) and leaves the bus (within leaveWait more,
// logged past it: the client leaves by itself once a reconnection's
// handshake under way ends). A signal published as it closes is sent or
// dropped, never left in the queue: once Close began sending what is
// queued, Publish drops; what the sender did not get to within flushWait
// is dropped, counted where its publisher counts drops; Close logs once
// how many (unsent=), whatever it waited. The client's own Close does not
// wait for a handler under way: one could go on after the node stopped (a
// control run on a hub shut down, a live event handed to the console's
// streams, an answer to a question on a closed connection). A second
// Close does nothing.
func (b *Bus) Close() { b.once.Do(b.close) }

func (b *Bus) close() {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(b.closeWait):
		b.log.Warn("bus: closed with a handler of a message still running", "waited", b.closeWait.String())
	}
	b.admit.Lock()
	b.flushBy = time.Now().Add(flushWait)
	b.stopped = true
	b.admit.Unlock()
	close(b.stop)
	left := make(chan struct{})
	go func() {
		defer close(left)
		<-b.sent
		if d := time.Until(b.flushBy); d > 0 {
			_ = b.nc.FlushTimeout(d)
		}
		b.nc.Close()
	}()
	waited := false
	select {
	case <-left:
	case <-time.After(time.Until(b.flushBy) + leaveWait):
		waited = true
	}
	// Nothing joins the queue any more (stopped), and the sender hands
	// nothing on past flushBy: what is left is dropped.
	unsent := b.discard()
	switch {
	case waited:
		b.log.Warn("bus: closed while the client still waits on the server; it leaves once its connection attempt ends",
			"waited", (flushWait + leaveWait).String(), "unsent", unsent)
	case unsent > 0:
		b.log.Warn("bus: closed with signals unsent", "waited", flushWait.String(), "unsent", unsent)
	default:
		b.log.Info("bus: closed", "unsent", 0)
	}
}

// discard empties the queue at Close, each signal counted as dropped
// where its publisher counts them, and says how many there were. A mark
// left is no signal: its Ready ends with the sender or its context.
func (b *Bus) discard() int {
	n := 0
	for {
		select {
		case m := <-b.out:
			if m.reached != nil {
				continue
			}
			b.queued.Add(-int64(len(m.data)))
			if m.tally != nil {
				m.tally.Add(1)
			}
			n++
		default:
			return n
		}
	}
}

// redactList hides the credentials of a server list in messages: all of
// each URL's user info, as a NATS user name may be a token.
func redactList(urls string) string {
	parts := strings.Split(urls, ",")
	for i, s := range parts {
		parts[i] = redact.Userinfo(s)
	}
	return strings.Join(parts, ",")
}
