package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/deaf"
	"github.com/simrelay/simrelay/internal/poll"
)

// memTransport is a transport in memory: it records executed jobs and
// hands in what the test puts in its inbox.
type memTransport struct {
	mu       sync.Mutex
	executed []string
	inbox    chan Received
	acked    []string
	sink     Sink
	jobs     []Job
}

func (m *memTransport) Name() string                { return "mem" }
func (m *memTransport) Check(context.Context) error { return nil }
func (m *memTransport) Inventory(context.Context) (Inventory, error) {
	return Inventory{SIMs: []proto.SIM{{Slot: proto.SIM1}}, WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550100001"}}}, nil
}
func (m *memTransport) Execute(_ context.Context, job Job) (Outcome, error) {
	m.mu.Lock()
	m.executed = append(m.executed, job.ID)
	m.jobs = append(m.jobs, job)
	m.mu.Unlock()
	if job.Channel == proto.ChannelWhatsApp { // receipts are pushed
		return Outcome{Status: proto.StatusSent, Ref: "wa-" + job.ID, AwaitDelivery: true}, nil
	}
	return Outcome{Status: proto.StatusSent}, nil
}
func (m *memTransport) Recover(context.Context, Job) (Outcome, bool)       { return Outcome{}, false }
func (m *memTransport) Delivery(context.Context, string) (Delivery, error) { return Delivery{}, nil }
func (m *memTransport) Receive(ctx context.Context, sink Sink) error {
	m.mu.Lock()
	m.sink = sink
	m.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-m.inbox:
			if err := sink.Take([]Received{r}, "", ""); err != nil {
				return err
			}
		}
	}
}
func (m *memTransport) Acknowledge(_ context.Context, r Received) error {
	m.mu.Lock()
	m.acked = append(m.acked, r.Key)
	m.mu.Unlock()
	return nil
}
func (m *memTransport) count(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.executed {
		if e == id {
			n++
		}
	}
	return n
}

// fakeHub is a scripted server side of the link: each connection gets a
// welcome, then script runs with the frames the agent sends.
type fakeHub struct {
	t      *testing.T
	mu     sync.Mutex
	frames []string // every frame received after hello, in order, across links
	hello  string   // the last hello
	links  int
	script func(link int, ws *websocket.Conn, frames <-chan proto.Frame)
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer dt_test" {
		http.Error(w, `{"error":"unauthorized","message":"no"}`, http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	_, data, err := ws.Read(ctx)
	if err != nil {
		return
	}
	if f, err := proto.Decode(data); err != nil || f.FrameType() != proto.TypeHello {
		h.t.Errorf("first frame: got %s, want hello", data)
		return
	}
	h.mu.Lock()
	h.hello = string(data)
	h.links++
	link := h.links
	h.mu.Unlock()
	write(ctx, ws, proto.Welcome{DeviceFingerprint: "fp", ServerTime: stamp(time.Now()), PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "BOTH"})
	frames := make(chan proto.Frame, 64)
	go func() {
		defer close(frames)
		readFrames(ctx, ws, func(data []byte, f proto.Frame) {
			h.mu.Lock()
			h.frames = append(h.frames, string(data))
			h.mu.Unlock()
			frames <- f
		})
	}()
	h.script(link, ws, frames)
}

// readFrames is a hub's reader of a link: it hands each frame the agent
// sends to each, as sent and decoded (one that does not decode is passed
// over), until the link ends.
func readFrames(ctx context.Context, ws *websocket.Conn, each func(data []byte, f proto.Frame)) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		f, err := proto.Decode(data)
		if err != nil {
			continue
		}
		each(data, f)
	}
}

func (h *fakeHub) seen(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, f := range h.frames {
		if strings.Contains(f, sub) {
			n++
		}
	}
	return n
}

func write(ctx context.Context, ws *websocket.Conn, f proto.Frame) {
	data, _ := proto.Encode(f)
	_ = ws.Write(ctx, websocket.MessageText, data)
}

func startAgent(t *testing.T, h http.Handler, tr Transport) (*Agent, *Journal, <-chan error) {
	t.Helper()
	return startAgentWithJournal(t, h, tr, filepath.Join(t.TempDir(), "j.db"))
}

func startAgentWithJournal(t *testing.T, h http.Handler, tr Transport, path string) (*Agent, *Journal, <-chan error) {
	t.Helper()
	return startAgentSet(t, h, tr, path, nil)
}

// startAgentSet is startAgentWithJournal with set, when not nil, applied
// to the agent before it runs (its clocks, its timeouts).
func startAgentSet(t *testing.T, h http.Handler, tr Transport, path string, set func(*Agent)) (*Agent, *Journal, <-chan error) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	a := New(Options{Config: ConfigFile{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), DeviceToken: "dt_test", Salt: "s1"},
		Transport: tr, Journal: j, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond, DeliveryPoll: 10 * time.Millisecond})
	if set != nil {
		set(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	finished := make(chan struct{})
	go func() { ended <- a.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	return a, j, ended
}

// A job sent again on a new link (its ack was lost) is acked again and
// carried out once; its ack comes before its status; an unanswered status
// is sent again on the next link.
func TestResentJobRunsOnceAndReportsAreResent(t *testing.T) {
	t.Parallel()
	job := proto.Send{ID: "job-1", Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		write(ctx, ws, job)
		for f := range frames {
			if st, ok := f.(*proto.Status); ok {
				if link == 1 {
					ws.Close(websocket.StatusCode(proto.CloseRestarting), "restarting") // the answer is lost
					return
				}
				write(ctx, ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			}
		}
	}
	tr := &memTransport{inbox: make(chan Received)}
	_, j, _ := startAgent(t, h, tr)
	poll.Until(t, "the report is acknowledged on the second link", func() bool {
		reports, _ := j.Reports()
		h.mu.Lock()
		links := h.links
		h.mu.Unlock()
		return links >= 2 && len(reports) == 0 && h.seen(`"type":"ack","id":"job-1"`) >= 2
	})
	if n := tr.count("job-1"); n != 1 {
		t.Fatalf("the job ran %d times, want 1", n)
	}
	if n := h.seen(`"type":"ack","id":"job-1"`); n != 2 {
		t.Fatalf("acks: got %d, want one per link", n)
	}
	if n := h.seen(`"type":"status","id":"job-1","status":"sent"`); n != 2 {
		t.Fatalf("status frames: got %d, want the first and its resend", n)
	}
	h.mu.Lock()
	first := h.frames[0]
	h.mu.Unlock()
	if !strings.Contains(first, `"type":"ack"`) {
		t.Fatalf("first frame after hello: got %s, want the ack before any status", first)
	}
}

// An inbound refused for now (retry_after) is kept and sent again; one
// refused for good is not sent again, and is cleared at the source (left
// there, a modem's SMS would be read again at every poll and fill its
// storage); one acknowledged is cleared at the source.
func TestInboundRefusalsAndAcks(t *testing.T) {
	t.Parallel()
	h := &fakeHub{t: t}
	h.script = func(link int, ws *websocket.Conn, frames <-chan proto.Frame) {
		ctx := context.Background()
		tries := 0
		for f := range frames {
			in, ok := f.(*proto.Inbound)
			if !ok {
				continue
			}
			switch {
			case strings.HasSuffix(in.ClientID, ":bad"):
				write(ctx, ws, proto.Error{Code: "validation_failed", Message: "inbound: from is invalid", ClientID: in.ClientID, Field: "from"})
			case strings.HasSuffix(in.ClientID, ":gone"):
				write(ctx, ws, proto.Error{Code: "not_found", Message: "inbound: This device is deleted.", ClientID: in.ClientID})
			case strings.HasSuffix(in.ClientID, ":held"): // no answer: it stays journaled
			case strings.HasSuffix(in.ClientID, ":later") && tries == 0:
				tries++
				write(ctx, ws, proto.Error{Code: "storage_budget_exceeded", Message: "inbound: budget spent", ClientID: in.ClientID, RetryAfter: 1})
			default:
				write(ctx, ws, proto.InboundAck{ClientID: in.ClientID, ID: 7, UUID: "u"})
			}
		}
	}
	tr := &memTransport{inbox: make(chan Received, 4)}
	_, j, _ := startAgent(t, h, tr)
	tr.inbox <- Received{Key: "bad", From: "x", Text: "refused"}
	// Refused for want of the device (deleted), not for what it holds: it
	// leaves the outbox but stays at its source, for a next pairing.
	tr.inbox <- Received{Key: "gone", From: "+15550000002", Text: "for the next pairing"}
	tr.inbox <- Received{Key: "later", From: "+15550000001", Text: "kept"}
	poll.Until(t, "the kept message is stored and both are cleared", func() bool {
		tr.mu.Lock()
		n := len(tr.acked)
		tr.mu.Unlock()
		recs, err := j.inbound()
		return n == 2 && err == nil && len(recs) == 0
	})
	if n := h.seen(`"client_id":"s1:later"`); n != 2 {
		t.Fatalf("the temporarily refused message was sent %d times, want 2", n)
	}
	if n := h.seen(`"client_id":"s1:bad"`); n != 1 {
		t.Fatalf("the message refused for good was sent %d times, want once", n)
	}
	if n := h.seen(`"client_id":"s1:gone"`); n != 1 {
		t.Fatalf("the message refused for want of the device was sent %d times, want once", n)
	}
	tr.mu.Lock()
	acked := strings.Join(tr.acked, ",")
	tr.mu.Unlock()
	if acked != "bad,later" {
		t.Fatalf("acknowledged at the source: %s, want the refused message, then the stored one", acked)
	}
	// The journal tells the transport which keys it cleared at the source.
	tr.mu.Lock()
	sink := tr.sink
	tr.mu.Unlock()
	if err := sink.Take([]Received{{Key: "held", From: "+15550000001", Text: "held"}}, "", ""); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]Seen{"bad": SeenCleared, "later": SeenCleared, "held": SeenHeld, "never": SeenNew} {
		if got, err := sink.Seen(key); err != nil || got != want {
			t.Errorf("Seen(%q): got %v %v, want %v", key, got, err, want)
		}
	}
}

// A revoked token (close 4501) stops the agent for good.
func TestRevokedTokenStops(t *testing.T) {
	t.Parallel()
	h := &fakeHub{t: t}
	h.script = func(_ int, ws *websocket.Conn, _ <-chan proto.Frame) {
		ws.Close(websocket.StatusCode(proto.CloseBadToken), "token revoked")
	}
	_, _, ended := startAgent(t, h, &memTransport{inbox: make(chan Received)})
	var err error
	select {
	case err = <-ended:
	case <-time.After(poll.Timeout):
		t.Fatal("the agent did not stop")
	}
	var fatal *FatalError
	if !errors.As(err, &fatal) || !strings.Contains(err.Error(), "pair this agent again") {
		t.Fatalf("got %v, want a FatalError asking to pair again", err)
	}
}

// A transport told about deliveries by push (a WhatsApp receipt) settles
// its job through the sink; the hello announced its WhatsApp number and a
// media job reached it whole.
func TestPushedDelivery(t *testing.T) {
	t.Parallel()
	job := proto.Send{ID: "wa-1", Channel: "whatsapp", To: "+15551234567", Message: "see this", ContentType: "image",
		MediaURL: "https://example.com/a.png", ExpiresAt: stamp(time.Now().Add(time.Hour))}
	h := &fakeHub{t: t}
	h.script = func(_ int, ws *websocket.Conn, frames <-chan proto.Frame) {
		write(context.Background(), ws, job)
		for f := range frames {
			if st, ok := f.(*proto.Status); ok {
				write(context.Background(), ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			}
		}
	}
	tr := &memTransport{inbox: make(chan Received)}
	_, j, _ := startAgent(t, h, tr)
	poll.Until(t, "the job awaits its receipt", func() bool { st, _ := j.JobState("wa-1"); return st == StateAwaiting })
	tr.mu.Lock()
	sink, got := tr.sink, tr.jobs[0]
	tr.mu.Unlock()
	if got.ContentType != "image" || got.MediaURL != job.MediaURL {
		t.Fatalf("the transport got %+v, want the content type and media URL", got.Send)
	}
	h.mu.Lock()
	hello := h.hello
	h.mu.Unlock()
	if !strings.Contains(hello, `"whatsapp":[{"phone":"+15550100001"}]`) {
		t.Fatalf("hello: got %s, want the WhatsApp number", hello)
	}
	if err := sink.Deliver("wa-wa-1", Delivery{Final: true, Status: proto.StatusDelivered}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the delivered report is acknowledged", func() bool {
		st, _ := j.JobState("wa-1")
		reports, _ := j.Reports()
		return st == StateDone && len(reports) == 0 && h.seen(`"status":"delivered"`) == 1
	})
}

// A server (or a proxy before it) that takes the connection and never
// answers the upgrade does not hold the agent for good: the upgrade has a
// deadline, and the agent connects again.
func TestUnansweredUpgradeIsGivenUp(t *testing.T) {
	t.Parallel()
	ln := deaf.Listen(t)
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	a := New(Options{Config: ConfigFile{WSURL: "ws://" + ln.Addr() + "/device/ws", DeviceToken: "dt_test", Salt: "s1"},
		Transport: &memTransport{inbox: make(chan Received)}, Journal: j, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond})
	a.dialTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { a.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	poll.Until(t, "a second connection after the first upgrade went unanswered", func() bool {
		return ln.Accepted() >= 2
	})
}
