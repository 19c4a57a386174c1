package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Defaults of PROTOCOL.md's reconnect rules.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultStableAfter = time.Minute // a link up this long resets the backoff
	// DefaultHelloTimeout bounds the wait for the close that follows an
	// error frame refusing the hello (PROTOCOL.md 7.1); the wait for the
	// answer to the hello itself is DefaultWelcomeTimeout.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultWelcomeTimeout bounds the wait for the answer to a hello
	// (PROTOCOL.md 7.2): a little over the server's own bound, a database
	// deadline of 30 s before it closes with 1013 (try again soon). A
	// shorter wait gave up a link the server was about to answer, and the
	// phone went to its growing backoff instead of 1013's quick retry.
	DefaultWelcomeTimeout = 35 * time.Second
	// DefaultDialTimeout bounds the upgrade (connection, TLS and the
	// answer to the upgrade request): a server or proxy that takes the
	// connection and never answers would hold the phone there for good.
	DefaultDialTimeout = 30 * time.Second
	// DefaultCloseTimeout bounds a stop: the phone sends its close frame
	// (1001 going away, PROTOCOL.md 7.4) and waits this long for the
	// server's answer before it drops the connection. The WebSocket
	// library alone would wait 5 s for a server that never answers.
	DefaultCloseTimeout = 2 * time.Second
	writeTimeout        = 10 * time.Second
	// MaxUnanswered is how many of its resent reports a link has out
	// without their answers, at most (PROTOCOL.md section 12).
	MaxUnanswered = 32
	// ResendPerSecond and ResendBurst pace what a link resends, reports
	// and inbound messages alike (PROTOCOL.md section 12: at most 20
	// frames a second). The server counts inbound messages against its
	// flood limit (50 a second, burst 200), and a report too when it moves
	// nothing: a resend whose status_ack the last link lost is a repeat,
	// and a phone whose link dropped with hundreds of reports unanswered
	// resends hundreds of repeats. An outbox of hundreds sent at once was
	// closed with 4029 and sent again on the next link, after 10 s at
	// least, as often as it took; the window of 32 unanswered bounded the
	// reports only while the server took its time to answer them. The
	// first 100 may go at once (half the server's burst), the rest 20 a
	// second, as PROTOCOL.md section 6 asks of a phone's sustained rate.
	ResendPerSecond = 20
	ResendBurst     = 100
)

// Config describes one phone.
type Config struct {
	WSURL string
	Token string
	// Hello is sent on every connection; Protocol defaults to this build's.
	// Its SelectedSIM is a choice made on the phone: it is sent until a link
	// is welcomed, then "" (the server's value, from welcome and config, wins).
	Hello      proto.Hello
	HTTPClient *http.Client
	// BackoffBase is the first reconnect ceiling and the unit of the fixed
	// waits of PROTOCOL.md section 14 (1 s there); tests shrink it.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	StableAfter time.Duration
	// DialTimeout bounds each upgrade (DefaultDialTimeout when zero).
	DialTimeout time.Duration
	// CloseTimeout bounds the wait for the server's answer to the close
	// frame a stop sends (DefaultCloseTimeout when zero).
	CloseTimeout time.Duration
	// OnJob is called once for every new job, on the reader goroutine, after
	// the job is journaled and acked (as an app hands the job to its sender),
	// so reports made from it reach the server after the ack. It must not
	// block for long.
	OnJob func(proto.Send)
	// OnInboundAck is called when the server stored an inbound message.
	OnInboundAck func(proto.InboundAck)
	// OnError is called with every error frame the server sends.
	OnError func(proto.Error)
	// OnConfig is called when an admin changed the device.
	OnConfig func(proto.Config)
	// OnState is called when the link goes up (nil error) or down (its cause).
	OnState func(up bool, err error)
	// OnRetry is called before each wait between links, with what ended the
	// last attempt (a websocket.CloseError, a *DialError, an *APIError...)
	// and how long the phone waits before the next.
	OnRetry func(err error, wait time.Duration)
	Logger  *slog.Logger
}

// Phone is a virtual phone. Its methods are safe for concurrent use.
type Phone struct {
	cfg Config

	mu       sync.Mutex
	ws       *websocket.Conn                    // the live link, nil between links
	welcome  proto.Welcome                      // of the live link
	journal  map[string]bool                    // ids of jobs taken (acked)
	reports  map[string]proto.Status            // reports not yet status_acked, by id+status
	order    []string                           // report keys in the order made
	inbound  map[string]proto.Inbound           // inbound not yet inbound_acked, by client_id
	inOrder  []string                           // their client ids in order
	selected string                             // the selected SIM as the server last said
	userSIM  string                             // a choice made on the phone, sent in hello until welcomed
	acked    map[string]proto.InboundAck        // inbound acks received, by client_id
	waiters  map[string][]chan proto.InboundAck // Inbound callers waiting for an ack
	answered chan struct{}                      // told of each answer to a report on the live link; nil between links
}

// DialError is a link attempt that reached no server: nothing answered the
// WebSocket upgrade (connection refused, DNS, timeouts).
type DialError struct {
	URL string
	Err error
}

func (e *DialError) Error() string { return fmt.Sprintf("client: dial %s: %v", e.URL, e.Err) }
func (e *DialError) Unwrap() error { return e.Err }

// ClosedError is a close the phone must not reconnect after (4500-4999).
type ClosedError struct {
	Code   int
	Reason string
}

func (e *ClosedError) Error() string {
	return fmt.Sprintf("the server closed the link for good: %d %s", e.Code, e.Reason)
}

// New returns a phone; Run connects it.
func New(cfg Config) *Phone {
	if cfg.Hello.Protocol == 0 {
		cfg.Hello.Protocol = proto.Version
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.StableAfter <= 0 {
		cfg.StableAfter = DefaultStableAfter
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Phone{cfg: cfg, journal: map[string]bool{}, reports: map[string]proto.Status{}, inbound: map[string]proto.Inbound{},
		selected: cfg.Hello.SelectedSIM, userSIM: cfg.Hello.SelectedSIM, acked: map[string]proto.InboundAck{}, waiters: map[string][]chan proto.InboundAck{}}
}

// Run keeps the phone connected until ctx ends (nil) or the server closes
// for good (*ClosedError) or refuses the token (*APIError). Between links
// it waits as PROTOCOL.md section 14 says: full jitter, a quick return after
// a restart (4012), a short wait that never grows while the server's
// database does not answer (1013, 503 unavailable), Retry-After on 429 and
// other 503s, a floor after 4008 and 4029,
// and a longer one after 4009, with a stop after the third 4009 in ten
// minutes (another client is using the token). The section's fixed waits are
// in units of BackoffBase (1 s by default, as the document has them).
func (p *Phone) Run(ctx context.Context) error {
	attempt := 0
	var replaced []time.Time // recent closes with 4009
	for {
		start := time.Now()
		err := p.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var closed *ClosedError
		var apiErr *APIError
		if errors.As(err, &closed) {
			return err
		}
		if errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden) {
			return err
		}
		if time.Since(start) >= p.cfg.StableAfter {
			attempt = 0
		}
		code := closeCode(err)
		if code == proto.CloseReplaced {
			now := time.Now()
			replaced = append(slices.DeleteFunc(replaced, func(t time.Time) bool { return now.Sub(t) > replacedWindow }), now)
			if len(replaced) >= replacedLimit {
				return &ClosedError{Code: code, Reason: "the device is connected elsewhere: replaced 3 times within 10 minutes"}
			}
		}
		var wait time.Duration
		wait, attempt = p.retryWait(err, attempt)
		p.cfg.Logger.Info("link down; reconnecting", "err", err, "in", wait)
		if p.cfg.OnRetry != nil {
			p.cfg.OnRetry(err, wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// retryWait is the wait before the next link after one that ended with
// err, the attempt-th in a row, and the count of the link after: one more,
// but none after a restart (4012), which starts the count again, and the
// same after the server's database did not answer (close 1013, or 503
// unavailable on the upgrade), whose wait is short and never grows, so
// that the phone is back within seconds of the database.
func (p *Phone) retryWait(err error, attempt int) (wait time.Duration, next int) {
	base := p.cfg.BackoffBase
	if TryAgainSoon(err) {
		return between(min(base, p.cfg.BackoffMax), min(SoonUnits*base, p.cfg.BackoffMax)), attempt
	}
	wait = p.backoff(attempt)
	switch closeCode(err) {
	case proto.CloseRestarting:
		return between(base, 5*base), 0
	case proto.CloseTooSlow, proto.CloseFlood:
		wait = max(wait, 10*base)
	case proto.CloseReplaced:
		wait = max(wait, between(30*base, 60*base))
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		wait += apiErr.RetryAfter
	}
	return wait, attempt + 1
}

// SoonUnits is the longest wait after the server said its database does
// not answer, in units of the backoff's base (PROTOCOL.md section 14: a
// random 1 to 15 s, whatever the count of attempts; BackoffMax when that
// is shorter): a fleet is back within it once the database is.
const SoonUnits = 15

// TryAgainSoon says whether a link ended because the server's database did
// not answer, a state the server expects to end soon: close 1013 (try
// again later), or the upgrade answered 503 with the error unavailable
// (the server cannot reach its database, or is restarting). A 503 without
// the server's error body (a proxy's) is not: it may last.
func TryAgainSoon(err error) bool {
	if closeCode(err) == proto.CloseTryAgainLater {
		return true
	}
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusServiceUnavailable && apiErr.Code == "unavailable"
}

// After this many closes with 4009 within replacedWindow, the phone stops.
const (
	replacedLimit  = 3
	replacedWindow = 10 * time.Minute
)

// backoff is full jitter: a random wait up to base * 2^attempt, capped.
func (p *Phone) backoff(attempt int) time.Duration {
	ceiling := p.cfg.BackoffMax
	if attempt < 30 {
		ceiling = min(p.cfg.BackoffBase<<attempt, p.cfg.BackoffMax)
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// between is a uniformly random wait from lo to hi.
func between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// closeCode is the close code a link ended with, 0 when it did not end by a close frame.
func closeCode(err error) int {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return int(ce.Code)
	}
	return 0
}

// session is one link: dial, hello, welcome, resend what is unacknowledged,
// then read until the link ends.
func (p *Phone) session(ctx context.Context) error {
	silence := NewSilence()
	hear := silence.Hear
	dctx, cancelDial := context.WithTimeout(ctx, p.cfg.DialTimeout)
	ws, res, err := websocket.Dial(dctx, p.cfg.WSURL, &websocket.DialOptions{
		HTTPClient: p.cfg.HTTPClient,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + p.cfg.Token}},
		OnPingReceived: func(context.Context, []byte) bool {
			hear()
			return true
		},
	})
	cancelDial() // the link, once open, outlives its upgrade's deadline
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			return readAPIError(res)
		}
		if res == nil {
			return &DialError{URL: p.cfg.WSURL, Err: err}
		}
		return err
	}
	// Frames are read and written with lctx, which the stop does not
	// cancel: a read or write whose context ends drops the connection at
	// once, without a close frame (the server sees 1006).
	lctx, endLink := context.WithCancel(context.WithoutCancel(ctx))
	defer p.closeOnStop(ctx, ws, endLink)()
	ws.SetReadLimit(proto.MaxFrameBytes)

	p.mu.Lock()
	hello := p.cfg.Hello
	hello.SelectedSIM = p.userSIM
	p.mu.Unlock()
	if err := write(lctx, ws, hello); err != nil {
		return err
	}
	welcome, err := p.awaitWelcome(lctx, ws)
	if err != nil {
		return err
	}

	answered := make(chan struct{}, MaxUnanswered)
	p.mu.Lock()
	p.ws, p.welcome, p.answered = ws, *welcome, answered
	// The server now holds the phone's choice; from here on an admin's
	// change must not be undone by a later hello.
	p.userSIM = ""
	if welcome.SelectedSIM != "" {
		p.selected = welcome.SelectedSIM
	}
	resend := p.unacknowledged()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.ws == ws {
			p.ws, p.answered = nil, nil
		}
		p.mu.Unlock()
	}()
	if p.cfg.OnState != nil {
		p.cfg.OnState(true, nil)
	}
	// Resent beside the reader, which reads the server's sends and the
	// answers that open the window meanwhile. A stop ends it too: once the
	// close frame is sent, its writes fail.
	rctx, stopResend := context.WithCancel(lctx)
	var resending sync.WaitGroup
	resending.Add(1)
	go func() {
		defer resending.Done()
		p.resend(rctx, ws, resend, answered)
	}()
	defer func() {
		stopResend()
		resending.Wait()
	}()

	// The link is dead after two ping intervals of silence.
	defer silence.Watch(welcome.PingInterval(), func() { ws.CloseNow() })()

	for {
		_, data, err := ws.Read(lctx)
		if err != nil {
			err = closeErr(err)
			if p.cfg.OnState != nil {
				p.cfg.OnState(false, err)
			}
			return err
		}
		hear()
		if err := p.handle(lctx, ws, data); err != nil {
			return err
		}
	}
}

// awaitWelcome reads the server's answer to the hello: the welcome, or
// the refusal and close that end the link. A send or config that comes
// before the welcome is taken as on a link that is up (PROTOCOL.md 7.2,
// implementation note): the job journaled and acked, the settings applied;
// one of a type the phone does not know is ignored. The wait is
// DefaultWelcomeTimeout in all.
func (p *Phone) awaitWelcome(lctx context.Context, ws *websocket.Conn) (*proto.Welcome, error) {
	hctx, cancel := context.WithTimeout(lctx, DefaultWelcomeTimeout)
	defer cancel()
	for {
		_, data, err := ws.Read(hctx)
		if err != nil {
			return nil, closeErr(err)
		}
		f, err := proto.Decode(data)
		if errors.Is(err, proto.ErrUnknownType) {
			continue // a phone ignores frame types it does not know (section 1)
		}
		switch f := f.(type) {
		case *proto.Welcome:
			if err == nil {
				return f, nil
			}
		case *proto.Error:
			if err == nil {
				return nil, p.refusedHello(ws, f)
			}
		case *proto.Send, *proto.Config:
			if err == nil {
				if err := p.handle(lctx, ws, data); err != nil {
					return nil, err
				}
				continue
			}
		}
		return nil, fmt.Errorf("client: expected welcome, got %s", data)
	}
}

// closeOnStop ends the link ws with a close frame, 1001 going away
// (PROTOCOL.md 7.4), when ctx (the phone's run) ends, and returns what the
// session defers. The server's answer to the close is awaited at most
// CloseTimeout: then endLink cancels the link's reads and writes, which
// drops the connection. The session returns within that time of the stop:
// when the stop came while the phone handled a frame, the library itself
// waits for the answer, and it ends the connection within its own 5 s
// after the session has returned. A session that ends without a stop
// drops its connection as before.
func (p *Phone) closeOnStop(ctx context.Context, ws *websocket.Conn, endLink context.CancelFunc) (done func()) {
	closed := make(chan struct{})
	waited := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		t := time.AfterFunc(p.cfg.CloseTimeout, func() {
			endLink()
			close(waited)
		})
		defer t.Stop()
		_ = ws.Close(websocket.StatusGoingAway, "the phone is stopping")
	})
	return func() {
		if stop() { // no stop: the link ended by itself
			endLink()
			_ = ws.CloseNow()
			return
		}
		select {
		case <-closed:
		case <-waited:
		}
	}
}

// refusedHello reads on to the close that follows an error frame answering
// the hello (PROTOCOL.md 7.1): the close code, not the error frame, says
// whether to reconnect, and 4510 (unsupported protocol) stops the phone. A
// link that ends otherwise is retried with the error frame's words.
func (p *Phone) refusedHello(ws *websocket.Conn, refusal *proto.Error) error {
	p.cfg.Logger.Warn("hello refused", "code", refusal.Code, "message", refusal.Message)
	ctx, cancel := context.WithTimeout(context.Background(), DefaultHelloTimeout)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return closeErr(err)
			}
			return fmt.Errorf("client: hello refused (%s: %s); the link ended without a close: %w", refusal.Code, refusal.Message, err)
		}
	}
}

// resend sends what the last links left unanswered, oldest first, with at
// most MaxUnanswered of them out at a time, paced (ResendPerSecond,
// ResendBurst; PROTOCOL.md section 12); one answered meanwhile is left
// out. It ends with the link (ctx) or a failed write.
func (p *Phone) resend(ctx context.Context, ws *websocket.Conn, frames []proto.Frame, answered <-chan struct{}) {
	if len(frames) == 0 {
		return
	}
	pace := rate.NewLimiter(ResendPerSecond, ResendBurst)
	out := 0 // resent, not yet answered
	for _, f := range frames {
		for out >= MaxUnanswered {
			select {
			case <-answered:
				out--
			case <-ctx.Done():
				return
			}
		}
	drain:
		for out > 0 {
			select {
			case <-answered:
				out--
			default:
				break drain
			}
		}
		if !p.pending(f) {
			continue
		}
		if pace.Wait(ctx) != nil {
			return
		}
		if !p.pending(f) { // answered while it waited
			continue
		}
		if write(ctx, ws, f) != nil {
			return
		}
		out++
	}
}

// pending says whether a report or inbound message still waits for its answer.
func (p *Phone) pending(f proto.Frame) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch f := f.(type) {
	case proto.Status:
		_, ok := p.reports[reportKey(f.ID, f.Status, f.Detail)]
		return ok
	case proto.Inbound:
		_, ok := p.inbound[f.ClientID]
		return ok
	}
	return true
}

func closeErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) && !proto.ShouldReconnect(int(ce.Code)) {
		return &ClosedError{Code: int(ce.Code), Reason: ce.Reason}
	}
	return err
}

func write(ctx context.Context, ws *websocket.Conn, f proto.Frame) error {
	data, err := proto.Encode(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return ws.Write(ctx, websocket.MessageText, data)
}
