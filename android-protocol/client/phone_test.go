package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/deaf"
)

// fakeServer welcomes every link and then closes it with code.
func fakeServer(t *testing.T, code websocket.StatusCode) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var links atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if _, _, err := ws.Read(ctx); err != nil { // hello
			return
		}
		links.Add(1)
		data, _ := proto.Encode(proto.Welcome{DeviceFingerprint: "p", ServerTime: "2026-11-22T10:04:05.123Z", PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "SIM1"})
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			return
		}
		_ = ws.Close(code, "test")
	}))
	t.Cleanup(srv.Close)
	return srv, &links
}

// runUntilStopped runs a phone against srv, reconnecting within
// milliseconds, until it stops (at most 10 s), and returns why.
func runUntilStopped(srv *httptest.Server) error {
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x", BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Run(ctx)
}

func TestThirdReplacementStopsThePhone(t *testing.T) {
	t.Parallel()
	srv, links := fakeServer(t, proto.CloseReplaced)
	err := runUntilStopped(srv)
	var closed *ClosedError
	if !errors.As(err, &closed) || closed.Code != proto.CloseReplaced {
		t.Fatalf("Run: got %v, want a ClosedError 4009 after the third replacement", err)
	}
	if n := links.Load(); n != 3 {
		t.Errorf("links: got %d, want 3", n)
	}
}

func TestRetryWaitFollowsSection14(t *testing.T) {
	t.Parallel()
	const base = time.Second
	p := New(Config{BackoffBase: base, BackoffMax: 300 * base})
	closed := func(code websocket.StatusCode) error { return websocket.CloseError{Code: code} }
	for range 200 {
		if w, _ := p.retryWait(errors.New("network down"), 3); w < 0 || w > 8*base {
			t.Fatalf("attempt 3: got %s, want full jitter up to 8 s", w)
		}
		if w, _ := p.retryWait(errors.New("network down"), 40); w > 300*base {
			t.Fatalf("attempt 40: got %s, want at most the 300 s cap", w)
		}
		if w, next := p.retryWait(closed(proto.CloseRestarting), 6); w < base || w > 5*base || next != 0 {
			t.Fatalf("4012: got %s, next attempt %d, want 1 to 5 s and the count reset", w, next)
		}
		for _, code := range []websocket.StatusCode{proto.CloseTooSlow, proto.CloseFlood} {
			if w, _ := p.retryWait(closed(code), 0); w < 10*base || w > 10*base {
				t.Fatalf("%d on the first attempt: got %s, want the 10 s floor", code, w)
			}
		}
		if w, _ := p.retryWait(closed(proto.CloseReplaced), 0); w < 30*base || w > 60*base {
			t.Fatalf("4009: got %s, want 30 to 60 s", w)
		}
		if w, _ := p.retryWait(&APIError{Status: 429, RetryAfter: 20 * base}, 0); w < 20*base || w > 21*base {
			t.Fatalf("429 with Retry-After 20: got %s, want 20 s plus the jitter of attempt 0", w)
		}
	}
}

// The server's database out of reach (close 1013, or 503 unavailable on
// the upgrade): the wait is 1 to 15 s however many attempts came before,
// and the count does not grow, so a phone is back within 15 s of the
// database's return however long it was gone. Retry-After is not added.
// A 503 that is not the server's (no error body: a proxy's) and 1011 keep
// the growing backoff.
func TestRetryWaitWhileTheDatabaseIsGone(t *testing.T) {
	t.Parallel()
	const base = time.Second
	p := New(Config{BackoffBase: base, BackoffMax: 300 * base})
	soon := []error{
		websocket.CloseError{Code: proto.CloseTryAgainLater, Reason: "database unavailable"},
		fmt.Errorf("read: %w", websocket.CloseError{Code: proto.CloseTryAgainLater}),
		&APIError{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 5 * base},
	}
	for _, err := range soon {
		if !TryAgainSoon(err) {
			t.Fatalf("%v: not taken for the database out of reach", err)
		}
		var longest time.Duration
		for attempt := range 200 {
			w, next := p.retryWait(err, attempt)
			if w < base || w > 15*base || next != attempt {
				t.Fatalf("%v on attempt %d: got %s, next attempt %d; want 1 to 15 s and the count left at %d", err, attempt, w, next, attempt)
			}
			longest = max(longest, w)
		}
		if longest < 8*base {
			t.Fatalf("%v: 200 waits were all under %s: not spread over 1 to 15 s", err, longest)
		}
	}
	// A BackoffMax shorter than 15 units is the longest wait here too.
	short := New(Config{BackoffBase: base, BackoffMax: 5 * base})
	for range 100 {
		if w, _ := short.retryWait(soon[0], 3); w < base || w > 5*base {
			t.Fatalf("1013 with BackoffMax 5 s: waited %s, want 1 to 5 s", w)
		}
	}
	// One shorter than the base too.
	tiny := New(Config{BackoffBase: base, BackoffMax: base / 4})
	for range 100 {
		if w, _ := tiny.retryWait(soon[0], 3); w > base/4 {
			t.Fatalf("1013 with BackoffMax 250 ms: waited %s, want at most 250 ms", w)
		}
	}
	for _, err := range []error{
		websocket.CloseError{Code: proto.CloseInternalError},
		&APIError{Status: http.StatusServiceUnavailable, Code: "http_503", RetryAfter: 5 * base},
	} {
		if TryAgainSoon(err) {
			t.Fatalf("%v: taken for the database out of reach", err)
		}
		if _, next := p.retryWait(err, 4); next != 5 {
			t.Fatalf("%v on attempt 4: next attempt %d, want 5 (the count grows)", err, next)
		}
	}
}

func TestRestartReconnectsAndStopsOnlyWithContext(t *testing.T) {
	t.Parallel()
	srv, links := fakeServer(t, proto.CloseRestarting)
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x", BackoffBase: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for links.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: got %v, want nil", err)
	}
	if n := links.Load(); n < 5 {
		t.Fatalf("links after 4012 closes: got %d, want the phone to keep coming back", n)
	}
	if p.SelectedSIM() != "SIM1" {
		t.Errorf("selected SIM after welcome: got %q, want SIM1 from welcome", p.SelectedSIM())
	}
}

// A server (or a proxy before it) that takes the connection and never
// answers the upgrade does not hold the phone for good: the upgrade has a
// deadline, and the phone connects again.
func TestUnansweredUpgradeIsGivenUp(t *testing.T) {
	t.Parallel()
	ln := deaf.Listen(t)
	retried := make(chan error, 1)
	p := New(Config{WSURL: "ws://" + ln.Addr() + "/device/ws", Token: "dt_x", BackoffBase: time.Millisecond,
		BackoffMax: 10 * time.Millisecond, DialTimeout: 100 * time.Millisecond,
		OnRetry: func(err error, _ time.Duration) {
			select {
			case retried <- err:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case err := <-retried:
		var de *DialError
		if !errors.As(err, &de) {
			t.Fatalf("retried after %v, want a *DialError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the phone still waits on an upgrade nobody answers")
	}
}

// A server that does not speak the phone's protocol answers its hello with
// an error frame (unsupported_protocol) and closes with 4510: the phone
// stops until it is updated (PROTOCOL.md 7.1, 13). It took the error frame
// for a missing welcome and reconnected with backoff, forever.
func TestUnsupportedProtocolStopsThePhone(t *testing.T) {
	t.Parallel()
	var links atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if _, _, err := ws.Read(ctx); err != nil { // hello
			return
		}
		links.Add(1)
		data, _ := proto.Encode(proto.Error{Code: "unsupported_protocol", Message: "This server speaks protocol version 2."})
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			return
		}
		_ = ws.Close(proto.CloseUnsupportedVer, "This server speaks protocol version 2.")
	}))
	t.Cleanup(srv.Close)
	err := runUntilStopped(srv)
	var closed *ClosedError
	if !errors.As(err, &closed) || closed.Code != proto.CloseUnsupportedVer {
		t.Fatalf("Run: got %v, want a ClosedError 4510", err)
	}
	if n := links.Load(); n != 1 {
		t.Errorf("links: got %d, want 1", n)
	}
}

// A phone with more unanswered reports than its window resends at most
// MaxUnanswered of them on a new link, and the next once one is answered
// (PROTOCOL.md section 12). It wrote its whole outbox at once: hundreds of
// inbound messages, which the server counts, were closed with 4029 and
// sent again whole on the next link, without end.
func TestResendKeepsItsWindow(t *testing.T) {
	t.Parallel()
	frames := make(chan proto.Frame, 64)
	answer := make(chan []byte)
	srv := welcomingServer(t, 10*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		go func() {
			for a := range answer {
				_ = ws.Write(ctx, websocket.MessageText, a)
			}
		}()
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			f, _ := proto.Decode(data)
			frames <- f
		}
	})
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x"})
	const outbox = MaxUnanswered + 8
	for i := range outbox {
		p.Report(fmt.Sprint("job-", i), proto.StatusSent, "")
	}
	runPhone(t, p)
	t.Cleanup(func() { close(answer) }) // runs before the phone is stopped: cleanups run in reverse order
	next := func(what string) *proto.Status {
		t.Helper()
		select {
		case f := <-frames:
			s, ok := f.(*proto.Status)
			if !ok {
				t.Fatalf("%s: got %#v, want a status", what, f)
			}
			return s
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing came", what)
		}
		return nil
	}
	var first *proto.Status
	for i := range MaxUnanswered {
		s := next(fmt.Sprint("report ", i))
		if i == 0 {
			first = s
		}
	}
	// Nothing more comes before an answer (a phone that breaks the window
	// sends the rest at once, well within this).
	select {
	case f := <-frames:
		t.Fatalf("got %#v with %d reports unanswered, want nothing before an answer", f, MaxUnanswered)
	case <-time.After(300 * time.Millisecond):
	}
	data, _ := proto.Encode(proto.StatusAck{ID: first.ID, Status: first.Status})
	answer <- data
	if s := next("the report after an answer"); s.ID != fmt.Sprint("job-", MaxUnanswered) {
		t.Fatalf("got the report of %s, want job-%d", s.ID, MaxUnanswered)
	}
}

// A phone's resent reports keep to the pace PROTOCOL.md section 12 asks
// of resends (at most 20 a second after a first burst), however fast the
// server answers them: a resend whose status_ack the last link lost is a
// repeat, which the server counts against its flood limit. Only the
// inbound messages were paced; against a server that answers at once,
// the window of 32 unanswered let hundreds of reports out in a moment.
func TestResentReportsArePaced(t *testing.T) {
	t.Parallel()
	const outbox = ResendBurst + 20
	type arrival struct {
		n       int
		elapsed time.Duration
	}
	arrivals := make(chan arrival, outbox)
	srv := welcomingServer(t, 20*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		welcomed := time.Now() // the phone's pace starts later: this only loosens the bound
		for n := 1; ; n++ {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			arrivals <- arrival{n, time.Since(welcomed)}
			s, ok := decoded(data).(*proto.Status)
			if !ok {
				return
			}
			ack, _ := proto.Encode(proto.StatusAck{ID: s.ID, Status: s.Status})
			if ws.Write(ctx, websocket.MessageText, ack) != nil {
				return
			}
		}
	})
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x"})
	for i := range outbox {
		p.Report(fmt.Sprint("job-", i), proto.StatusSent, "")
	}
	runPhone(t, p)
	for range outbox {
		select {
		case a := <-arrivals:
			if bound := ResendBurst + int(ResendPerSecond*a.elapsed.Seconds()) + 1; a.n > bound {
				t.Fatalf("report %d came %v after the welcome, over the pace's %d by then", a.n, a.elapsed, bound)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the outbox of %d was not resent within 10 s", outbox)
		}
	}
}

// runPhone runs p until the test ends, and waits for it to stop then.
func runPhone(t *testing.T, p *Phone) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = p.Run(ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
}

// forwardAcks is a server's side of a link once welcomed: it sends acks
// the id of each ack the phone sends, until the link ends.
func forwardAcks(ctx context.Context, ws *websocket.Conn, acks chan<- string) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if a, ok := decoded(data).(*proto.Ack); ok {
			acks <- a.ID
		}
	}
}

// decoded is the frame data holds; nil when it holds none.
func decoded(data []byte) proto.Frame {
	f, _ := proto.Decode(data)
	return f
}

// An error refusing an ack names the job, as one refusing a status does,
// but answers no report: the job's pending reports stay in the outbox
// (PROTOCOL.md 11.1, "error starting with ack: : log it; no other
// action"). They were dropped with it, never to be sent again.
func TestRefusedAckKeepsTheJobsReports(t *testing.T) {
	t.Parallel()
	srv := welcomingServer(t, 10*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		for _, f := range []proto.Frame{
			proto.Error{Code: "not_found", Message: "ack: This device has no job with that id.", ID: "job-1"},
			proto.Config{SelectedSIM: "SIM2"}, // read after the error: the phone has handled it
		} {
			data, _ := proto.Encode(f)
			if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
				return
			}
		}
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	})
	if n := pendingAfterConfig(t, srv, proto.StatusSent); n != 1 {
		t.Fatalf("pending reports after a refused ack: got %d, want the job's 1", n)
	}
}

// An error refusing a status drops the one report it answers, the job's
// oldest still waiting (answers keep the order of the reports), not every
// report of the job: a delivered report refused for its detail leaves the
// job's sent to its own answer. Both were dropped.
func TestRefusedStatusDropsOneReport(t *testing.T) {
	t.Parallel()
	srv := welcomingServer(t, 10*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		// The two resent reports, answered in their order: the sent is
		// refused (as it might be for a bad field), then the config probe.
		for range 2 {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
		for _, f := range []proto.Frame{
			proto.Error{Code: "validation_failed", Message: "status: at must be an RFC 3339 time.", ID: "job-1", Field: "at"},
			proto.Config{SelectedSIM: "SIM2"},
		} {
			data, _ := proto.Encode(f)
			if ws.Write(ctx, websocket.MessageText, data) != nil {
				return
			}
		}
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	})
	if n := pendingAfterConfig(t, srv, proto.StatusSent, proto.StatusDelivered); n != 1 {
		t.Fatalf("pending reports after one refused: got %d, want the delivered one", n)
	}
}

// welcomingServer is a server, closed with the test, that takes each link,
// reads its hello, answers a welcome and hands the link to serve, all
// within timeout.
func welcomingServer(t *testing.T, timeout time.Duration, serve func(ctx context.Context, ws *websocket.Conn)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if _, _, err := ws.Read(ctx); err != nil { // hello
			return
		}
		data, _ := proto.Encode(proto.Welcome{DeviceFingerprint: "p", ServerTime: "2026-11-22T10:04:05.123Z", PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "SIM1"})
		if ws.Write(ctx, websocket.MessageText, data) != nil {
			return
		}
		serve(ctx, ws)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pendingAfterConfig runs a phone holding reports of job-1 against srv, a
// server that answers them and then sends a config frame, and returns the
// reports still pending once that config has been handled.
func pendingAfterConfig(t *testing.T, srv *httptest.Server, statuses ...string) int {
	t.Helper()
	configured := make(chan struct{})
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x",
		OnConfig: func(proto.Config) { close(configured) }})
	for _, st := range statuses {
		p.Report("job-1", st, "")
	}
	runPhone(t, p)
	select {
	case <-configured:
	case <-time.After(5 * time.Second):
		t.Fatal("the config after the error did not come")
	}
	return p.Pending()
}

// A send whose id is empty or longer than proto.MaxJobIDBytes names no job
// (PROTOCOL.md 8.3): the phone neither journals nor acks it, hands it to no
// sender, and keeps the link, where the next send is taken as usual. It
// acked such an id, which the server answers not_found and charges to the
// flood limit, and handed the job to its sender.
func TestSendWithoutAJobIDIsIgnored(t *testing.T) {
	t.Parallel()
	acks := make(chan string, 8)
	srv := welcomingServer(t, 10*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		for _, id := range []string{"", strings.Repeat("x", proto.MaxJobIDBytes+1), "job-1"} {
			data, _ := proto.Encode(proto.Send{ID: id, Channel: proto.ChannelSMS, To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1, ExpiresAt: "2999-01-01T00:00:00.000Z"})
			if ws.Write(ctx, websocket.MessageText, data) != nil {
				return
			}
		}
		forwardAcks(ctx, ws, acks)
	})
	jobs := make(chan string, 8)
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x",
		OnJob: func(s proto.Send) { jobs <- s.ID }})
	runPhone(t, p)
	for _, ch := range []struct {
		what string
		c    chan string
	}{{"ack", acks}, {"job", jobs}} {
		select {
		case id := <-ch.c:
			if id != "job-1" {
				t.Fatalf("first %s for id %.20q..., want job-1's: a send without a job id is ignored", ch.what, id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s for job-1", ch.what)
		}
	}
}

// A config or send that comes before the welcome is taken as any other
// (PROTOCOL.md 7.2, implementation note): the link comes up with the
// welcome that follows, the config applied and the job acked. The phone
// failed the link on the first frame that was not a welcome.
func TestFramesBeforeWelcomeAreTaken(t *testing.T) {
	t.Parallel()
	acks := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if _, _, err := ws.Read(ctx); err != nil { // hello
			return
		}
		for _, f := range []proto.Frame{
			proto.Config{SelectedSIM: "SIM2", DeviceName: "Front desk"},
			proto.Send{ID: "job-1", Channel: proto.ChannelSMS, To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1, ExpiresAt: "2999-01-01T00:00:00.000Z"},
			proto.Welcome{DeviceFingerprint: "p", ServerTime: "2026-11-22T10:04:05.123Z", PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "SIM2"},
		} {
			data, _ := proto.Encode(f)
			if ws.Write(ctx, websocket.MessageText, data) != nil {
				return
			}
		}
		forwardAcks(ctx, ws, acks)
	}))
	t.Cleanup(srv.Close)
	up := make(chan struct{}, 4)
	configs := make(chan string, 4)
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x",
		OnState: func(online bool, _ error) {
			if online {
				up <- struct{}{}
			}
		},
		OnConfig: func(c proto.Config) { configs <- c.SelectedSIM }})
	runPhone(t, p)
	for _, w := range []struct {
		what string
		ok   func() bool
	}{
		{"config", func() bool { return <-configs == "SIM2" }},
		{"ack of job-1", func() bool { return <-acks == "job-1" }},
		{"link up", func() bool { <-up; return true }},
	} {
		got := make(chan bool, 1)
		go func() { got <- w.ok() }()
		select {
		case ok := <-got:
			if !ok {
				t.Fatalf("%s: not as sent", w.what)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s: the frames before the welcome failed the link", w.what)
		}
	}
}
