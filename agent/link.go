package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// Limits of PROTOCOL.md sections 6 and 12 on what a phone sends unasked.
const (
	// maxUnanswered bounds the status and inbound frames waiting for their
	// answer on one link.
	maxUnanswered = 32
	// resendPerSecond keeps resends under the flood limit.
	resendPerSecond = 20
	// welcomeTimeout bounds the wait for the answer to the hello
	// (PROTOCOL.md 7.2): a little over the server's own bound, a database
	// deadline of 30 s before it closes with 1013 (try again soon). A
	// shorter wait gave up a link the server was about to answer, and the
	// agent went to its growing backoff instead of 1013's quick retry.
	welcomeTimeout = 35 * time.Second
	writeTimeout   = 10 * time.Second
	// dialTimeout bounds the upgrade: the connection, TLS and the answer
	// to the upgrade request. A server or proxy that takes the connection
	// and never answers would otherwise hold the agent there for good, with
	// no reconnect.
	dialTimeout = 30 * time.Second
)

// holdLink keeps the link up, reconnecting with PROTOCOL.md's backoff,
// until ctx ends or a *FatalError.
func (a *Agent) holdLink(ctx context.Context) error {
	b := &backoff{base: a.opt.BackoffBase, max: a.opt.BackoffMax, stable: a.opt.StableAfter, probe: a.opt.ProbeEvery}
	for {
		var upFor time.Duration
		err := a.session(ctx, &upFor)
		if ctx.Err() != nil {
			return nil
		}
		wait, fatal := b.next(err, upFor, time.Now())
		if fatal != nil {
			a.log.Error("link stopped for good", "err", err, "reason", fatal)
			return fatal
		}
		a.log.Info("link down; reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// link is one WebSocket connection and what was sent on it.
type link struct {
	ws *websocket.Conn
	mu sync.Mutex
	// waiting are the reports and inbound messages sent on this link and
	// not yet answered, by key ("s:" id \x00 status, "i:" client_id).
	waiting map[string]bool
	// later holds back a report refused for now (retry_after) until then.
	later map[string]time.Time
	// order lists the waiting keys in the order they were sent: answers
	// come in that order, so an error frame answers the oldest entry of
	// its kind (and id) (PROTOCOL.md 11.1).
	order []string
	// sent are the journal records sent on this link (answered or not),
	// by key and journal record: a report journaled again under the key
	// of one answered before is a new record, and goes. Records the
	// journal no longer holds are forgotten (forget), so a link that
	// lives for months does not keep one entry per message it carried.
	sent map[string]bool
}

// forget drops what the link keeps of journal records that are no
// longer in the outbox (records and their keys, read whole): answered, or
// refused for good. Were one journaled again, it would be a new record.
// A report held back (later) whose record left the outbox before its time
// came is dropped too.
func (l *link) forget(records, keys []string) {
	inRecords := make(map[string]bool, len(records))
	for _, r := range records {
		inRecords[r] = true
	}
	inKeys := make(map[string]bool, len(keys))
	for _, k := range keys {
		inKeys[k] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for r := range l.sent {
		if !inRecords[r] {
			delete(l.sent, r)
		}
	}
	for k := range l.later {
		if !inKeys[k] {
			delete(l.later, k)
		}
	}
}

// oldest returns the first waiting key of a kind ("s:" or "i:") that
// names id (any id when id is ""), "" when none.
func (l *link) oldest(kind, id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range l.order {
		rest, ok := strings.CutPrefix(key, kind)
		if !ok {
			continue
		}
		if name, _, _ := strings.Cut(rest, "\x00"); id == "" || name == id {
			return key
		}
	}
	return ""
}

func (l *link) write(ctx context.Context, f proto.Frame) error {
	data, err := proto.Encode(f)
	if err != nil {
		return err
	}
	// Not cancelled by the agent's stop: that closes the link with a close
	// frame (goAway), which a write cut short would prevent.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	return l.ws.Write(ctx, websocket.MessageText, data)
}

func (l *link) answered(key string, retryAfter time.Duration) {
	l.mu.Lock()
	delete(l.waiting, key)
	if i := slices.Index(l.order, key); i >= 0 {
		l.order = slices.Delete(l.order, i, i+1)
	}
	if retryAfter > 0 {
		l.later[key] = time.Now().Add(retryAfter)
	}
	l.mu.Unlock()
}

// session is one link: upgrade, hello, welcome, then the reader and the
// report pump until the link ends.
func (a *Agent) session(ctx context.Context, upFor *time.Duration) error {
	cfg := a.opt.Config
	inv, err := a.askInventory(ctx)
	if err != nil {
		select {
		case <-a.known:
			a.log.Warn("inventory failed; announcing the last one", "err", err)
			a.mu.Lock()
			inv = a.inventory
			a.mu.Unlock()
		default:
			return fmt.Errorf("the device is not ready: %w", err)
		}
	} else {
		a.setInventory(inv)
	}
	silence := client.NewSilence()
	hear := silence.Hear
	dctx, cancelDial := context.WithTimeout(ctx, a.dialTimeout)
	ws, res, err := websocket.Dial(dctx, cfg.WSURL, &websocket.DialOptions{
		HTTPClient: a.opt.HTTPClient,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + cfg.DeviceToken}},
		OnPingReceived: func(context.Context, []byte) bool {
			hear()
			return true
		},
	})
	cancelDial() // the link, once open, outlives its upgrade's deadline
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			return apiError(res)
		}
		return fmt.Errorf("dial %s: %w", cfg.WSURL, err)
	}
	defer ws.CloseNow()
	// Stopping ends the link with a close frame, 1001 going away
	// (PROTOCOL.md 7.4), not a dropped connection: frames are read and
	// written with contexts the stop does not cancel (a cancelled read or
	// write drops the connection at once), and the read ends when the
	// handshake does. The WebSocket library bounds the handshake: 5 s to
	// write the close frame and 5 s for the server's answer.
	defer context.AfterFunc(ctx, func() { _ = ws.Close(websocket.StatusGoingAway, "the agent is stopping") })()
	rctx := context.WithoutCancel(ctx)
	ws.SetReadLimit(proto.MaxFrameBytes)
	l := &link{ws: ws, waiting: map[string]bool{}, later: map[string]time.Time{}, sent: map[string]bool{}}

	sims := inv.SIMs
	if sims == nil {
		sims = []proto.SIM{} // an agent without SIMs says so (section 8.1)
	}
	hello := a.checkHello(proto.Hello{Protocol: proto.Version, AppVersion: a.opt.AppVersion, SIMs: sims, WhatsApp: inv.WhatsApp, IMessage: inv.IMessage, Health: inv.Health})
	hello.Jobs = a.heldJobs()
	if err := l.write(ctx, hello); err != nil {
		return err
	}
	welcome, err := a.awaitWelcome(ctx, l)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	up := time.Now()
	defer func() { *upFor = time.Since(up) }()
	if st, err := time.Parse(time.RFC3339Nano, welcome.ServerTime); err == nil {
		a.synced(st)
	}
	a.log.Info("link up", "device", welcome.DeviceFingerprint, "sims", len(sims), "selected_sim", welcome.SelectedSIM)

	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { a.pump(lctx, l) })
	wg.Go(func() { a.reportHealth(lctx, l) })

	// The link is dead after two ping intervals of silence (section 6).
	defer silence.Watch(welcome.PingInterval(), func() { ws.CloseNow() })()

	for {
		_, data, err := ws.Read(rctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return closeErr(err)
		}
		hear()
		if err := a.handle(lctx, l, data); err != nil {
			return err
		}
	}
}

// heldJobs is the hello's jobs (PROTOCOL.md section 16.1): the WhatsApp
// and iMessage jobs of the journal the server has no report of, read
// between links, when no frame can add one. Every job a link before this
// one wrote to the agent is either journaled or never read: the server
// hands a job it handed here and that the list does not name to its
// number's holder. nil, which says nothing (the server keeps them here),
// when the journal holds more than the protocol's bound or cannot be read.
func (a *Agent) heldJobs() []string {
	ids, ok, err := a.j.HeldJobs(proto.MaxHelloJobs)
	switch {
	case err != nil:
		a.log.Warn("hello: the jobs the journal holds could not be read; not named, so the server keeps for this agent the jobs it handed it", "err", err)
		return nil
	case !ok:
		a.log.Warn("hello: the journal holds more unreported jobs than a hello may name; not named, so the server keeps for this agent the jobs it handed it", "max", proto.MaxHelloJobs)
		return nil
	}
	return ids
}

// awaitWelcome reads until the welcome. A refused hello comes as an error
// frame and then the close whose code decides what to do (4510 stops the
// agent), so the error is logged and the close read. A send or config
// before the welcome is handled as usual (PROTOCOL.md 7.2).
func (a *Agent) awaitWelcome(ctx context.Context, l *link) (*proto.Welcome, error) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), welcomeTimeout)
	defer cancel()
	for {
		_, data, err := l.ws.Read(hctx)
		if err != nil {
			return nil, closeErr(err)
		}
		f, err := proto.Decode(data)
		if err != nil {
			a.log.Debug("ignoring a frame before welcome", "err", err)
			continue
		}
		switch f := f.(type) {
		case *proto.Welcome:
			return f, nil
		case *proto.Error:
			a.log.Error("the server refused the hello", "code", f.Code, "message", f.Message, "field", f.Field)
		case *proto.Send, *proto.Config:
			if err := a.handle(ctx, l, data); err != nil {
				return nil, err
			}
		default:
			a.log.Debug("ignoring a frame before welcome", "type", f.FrameType())
		}
	}
}

// maxRetryAfter is the longest wait an error frame's retry_after is taken
// for: a longer one is that long, which no link outlives, so the report
// goes again on the next link. Larger counts of seconds overflowed a
// duration, and one that wrapped to 0 read as a refusal for good.
const maxRetryAfter = 365 * 24 * time.Hour

// retryAfter is an error frame's retry_after as a wait: 0 when the frame
// has none (a refusal for good), else at least a second and at most
// maxRetryAfter (a negative count, which no server sends, is still a
// temporary refusal).
func retryAfter(seconds int) time.Duration {
	switch {
	case seconds == 0:
		return 0
	case seconds < 0:
		return time.Second
	case seconds > int(maxRetryAfter/time.Second):
		return maxRetryAfter
	}
	return time.Duration(seconds) * time.Second
}

func closeErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) && !proto.ShouldReconnect(int(ce.Code)) {
		return &closedError{code: int(ce.Code), reason: ce.Reason}
	}
	return err
}

func apiError(res *http.Response) error {
	// The reference client reads the contract's error body the same way.
	e := &client.APIError{Status: res.StatusCode}
	if s := res.Header.Get("Retry-After"); s != "" {
		if d, err := time.ParseDuration(s + "s"); err == nil {
			e.RetryAfter = d
		}
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 4096)).Decode(e); err != nil || e.Code == "" {
		e.Code, e.Message = fmt.Sprintf("http_%d", res.StatusCode), res.Status
	}
	return e
}

// handle answers one frame of the server. It never blocks on the device:
// jobs go to the executor through the journal.
func (a *Agent) handle(ctx context.Context, l *link, data []byte) error {
	f, err := proto.Decode(data)
	if err != nil {
		a.log.Debug("ignoring a frame", "err", err)
		return nil // unknown types are ignored (section 1)
	}
	switch f := f.(type) {
	case *proto.Send:
		if f.ID == "" || len(f.ID) > proto.MaxJobIDBytes {
			// Neither journaled (the journal takes no empty key, none
			// over 32 KiB) nor answered (an ack of it names no job):
			// ignored, so that it does not end the link, and with it
			// every job the server sends after it, on every link.
			a.log.Warn("ignoring a send frame whose id is no job id", "id_bytes", len(f.ID), "channel", f.Channel)
			return nil
		}
		a.ackMu.Lock()
		fresh, err := a.j.Take(*f, time.Now())
		if err != nil {
			a.ackMu.Unlock()
			return err // not journaled: no ack; the server sends it again
		}
		err = l.write(ctx, proto.Ack{ID: f.ID})
		a.ackMu.Unlock()
		if fresh {
			a.log.Debug("job taken", "id", f.ID, "channel", f.Channel, "sim_slot", f.SIMSlot)
			wake(a.execWake)
		} else {
			a.log.Debug("job sent again by the server; acked again, not carried out twice", "id", f.ID)
		}
		return err
	case *proto.StatusAck:
		if _, err := a.j.AckReport(f.ID, f.Status, f.Detail); err != nil {
			return err
		}
		l.answered("s:"+reportKey(f.ID, f.Status, f.Detail), 0)
		wake(a.pumpWake)
	case *proto.InboundAck:
		if _, ok, err := a.j.ackInbound(f.ClientID, false); err != nil {
			return err
		} else if ok {
			a.log.Info("message stored by the server", "client_id", f.ClientID, "id", f.ID)
		}
		l.answered("i:"+f.ClientID, 0)
		wake(a.ackWake)
		wake(a.pumpWake)
	case *proto.Config:
		a.log.Info("device settings changed", "selected_sim", f.SelectedSIM, "device_name", f.DeviceName)
	case *proto.Error:
		return a.refused(l, f)
	}
	return nil
}

// refused applies an error frame (PROTOCOL.md 11.1): a refused report is
// dropped, a temporarily refused one (retry_after) kept and sent again later.
func (a *Agent) refused(l *link, f *proto.Error) error {
	retry := retryAfter(f.RetryAfter)
	a.log.Warn("the server refused a frame", "code", f.Code, "message", f.Message, "id", f.ID, "client_id", f.ClientID, "field", f.Field, "retry_after", f.RetryAfter)
	switch {
	case f.ClientID != "" || strings.HasPrefix(f.Message, "inbound: "):
		// The refused message is the one of this client_id or, when the
		// frame names none, the oldest inbound waiting on the link.
		key := l.oldest("i:", f.ClientID)
		if key == "" {
			break
		}
		l.answered(key, retry)
		clientID := strings.TrimPrefix(key, "i:")
		switch {
		case retry > 0:
		case f.Code == "not_found":
			// The device was deleted: the message may be stored by its
			// next pairing, so it stays at its source (PROTOCOL.md 10).
			if _, err := a.j.dropInbound(clientID, a.clock.wall()); err != nil {
				return err
			}
			a.log.Error("inbound message refused: the device is deleted; dropped here, left at the source", "client_id", clientID)
		default:
			if _, _, err := a.j.ackInbound(clientID, true); err != nil {
				return err
			}
			a.log.Error("inbound message refused for good; dropped, and cleared at the source", "client_id", clientID, "code", f.Code, "field", f.Field)
			wake(a.ackWake)
		}
	case strings.HasPrefix(f.Message, "status: "):
		// The refused report is the oldest of this id waiting on the
		// link (with or without a detail): one answer, one report.
		key := l.oldest("s:", f.ID)
		if key == "" {
			break
		}
		l.answered(key, retry)
		if retry == 0 {
			id, rest, _ := strings.Cut(strings.TrimPrefix(key, "s:"), "\x00")
			st, detail, _ := strings.Cut(rest, "\x00")
			if _, err := a.j.DropReport(id, st, detail); err != nil {
				return err
			}
			a.log.Error("report refused for good; dropped", "id", id, "status", st, "detail", detail, "code", f.Code, "field", f.Field)
		}
	}
	wake(a.pumpWake)
	return nil
}

// pump sends the journal's unanswered reports and inbound messages on the
// link, oldest first: at most maxUnanswered waiting for an answer and
// resendPerSecond a second, each journal record once per link unless
// refused for now.
func (a *Agent) pump(ctx context.Context, l *link) {
	limit := rate.NewLimiter(rate.Limit(resendPerSecond), resendPerSecond)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		frames, keys, records, err := a.outbox()
		if err != nil {
			a.log.Error("journal read failed", "err", err)
		} else {
			l.forget(records, keys)
		}
		for i, f := range frames {
			key := keys[i]
			l.mu.Lock()
			busy := len(l.waiting) >= maxUnanswered
			until, held := l.later[key]
			skip := l.waiting[key] || (l.sent[records[i]] && !held) || (held && time.Now().Before(until))
			l.mu.Unlock()
			if busy {
				break
			}
			if skip {
				continue
			}
			if err := limit.Wait(ctx); err != nil {
				return
			}
			l.mu.Lock()
			l.waiting[key] = true
			l.order = append(l.order, key)
			delete(l.later, key)
			l.sent[records[i]] = true
			l.mu.Unlock()
			if err := l.write(ctx, f); err != nil {
				return // the reader sees the link end
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.pumpWake:
		case <-tick.C:
		}
	}
}

// outbox is what waits for an answer: reports, then inbound messages,
// with the key each is answered by and the journal record it is (the key
// and, for a report, its seq: a client_id is journaled once).
func (a *Agent) outbox() (frames []proto.Frame, keys, records []string, err error) {
	// Both lists hold their readable records even with an error.
	reports, seqs, rerr := a.j.reports()
	in, ierr := a.j.inbound()
	err = errors.Join(rerr, ierr)
	frames = make([]proto.Frame, 0, len(reports)+len(in))
	keys = make([]string, 0, cap(frames))
	records = make([]string, 0, cap(frames))
	for i, r := range reports {
		frames = append(frames, r)
		key := "s:" + reportKey(r.ID, r.Status, r.Detail)
		keys = append(keys, key)
		records = append(records, key+"\x00"+seqs[i])
	}
	for _, r := range in {
		if r.Acked {
			continue
		}
		ids, ok := r.uploaded()
		if !ok {
			continue // the uploader wakes the pump once its files are up
		}
		f := r.Frame
		f.Media = ids
		frames = append(frames, f)
		keys = append(keys, "i:"+r.Frame.ClientID)
		records = append(records, "i:"+r.Frame.ClientID)
	}
	return frames, keys, records, err
}

// reportHealth sends the device's health every HealthEvery while the link
// is up (the hello carried it at the start). A report the server refuses
// (rate_limited after a reconnect) is simply followed by the next one.
func (a *Agent) reportHealth(ctx context.Context, l *link) {
	tick := time.NewTicker(a.opt.HealthEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		inv, err := a.askInventory(ctx)
		if err != nil {
			a.log.Warn("health: the device did not answer", "err", err)
			continue
		}
		if inv.Health == nil {
			continue
		}
		if err := l.write(ctx, a.checkHealth(*inv.Health)); err != nil {
			return // the link is ending; the reader sees it
		}
	}
}
