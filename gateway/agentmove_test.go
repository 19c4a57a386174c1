package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// A WhatsApp number moving to another agent (PROTOCOL.md section 16.1):
// the jobs the old agent was handed and did not ack stay its own until it
// reports them or is deleted, across a restart of the server; the jobs
// never handed go to the new agent at once.

const moveNumber = "+15550107777"

// moveWorld is a store with a company and its devices, on which servers
// (nodes) start and stop.
type moveWorld struct {
	t       *testing.T
	st      store.Backend
	devices *device.Service
	company uint64
}

func newMoveWorld(t *testing.T) *moveWorld {
	t.Helper()
	st := storetest.OpenWith(t, storetest.Options{})
	c := store.Company{Name: "Acme", APIKeyHash: []byte("k")}
	admin := store.User{Email: "a@acme.test", PasswordHash: "x"}
	if err := st.CreateCompany(&c, &admin); err != nil {
		t.Fatal(err)
	}
	return &moveWorld{t: t, st: st, devices: device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now), company: c.ID}
}

// pair registers a device through the pairing flow and returns its token.
func (w *moveWorld) pair(fingerprint string) string {
	w.t.Helper()
	ctx := context.Background()
	p, err := w.devices.CreatePairing(ctx, w.company, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	reg, err := w.devices.Register(ctx, device.RegisterInput{PairingCode: p.Code, DeviceFingerprint: fingerprint})
	if err != nil {
		w.t.Fatal(err)
	}
	return reg.Token
}

// moveNode is one run of the server on the world's store: a hub and the
// agent channels, served on loopback.
type moveNode struct {
	w      *moveWorld
	hub    *Hub
	agents *channel.Service
	url    string
	stop   func()
}

// start runs a server on the store; stop ends it (the test's end does).
func (w *moveWorld) start() *moveNode {
	w.t.Helper()
	return w.startWith(moveOptions{})
}

// moveOptions change a node's agent channels: their clock (time.Now when
// nil), their gap (a millisecond when zero), their store (the world's,
// wrapped by store when it is not nil), and the Agents the hub uses (the
// service itself when wrap is nil).
type moveOptions struct {
	now   func() time.Time
	gap   pacing.Gap
	store func(channel.Store) channel.Store
	wrap  func(*channel.Service) Agents
}

// startWith is start with the options.
func (w *moveWorld) startWith(o moveOptions) *moveNode {
	w.t.Helper()
	log := slog.New(slog.DiscardHandler)
	messages := sms.New(sms.Config{}, w.st, log, time.Now)
	hub := New(Config{}, w.devices, messages, log, time.Now)
	messages.SetDispatcher(hub)
	if o.now == nil {
		o.now = time.Now
	}
	if o.gap == (pacing.Gap{}) {
		o.gap = pacing.Gap{Min: time.Millisecond, Max: time.Millisecond}
	}
	fast := channel.Pacing{Caps: pacing.Caps{PerMinute: 1000, PerHour: 10000, PerDay: 60000}, Gap: o.gap}
	var agentStore channel.Store = w.st
	if o.store != nil {
		agentStore = o.store(agentStore)
	}
	agents, err := channel.New(channel.Config{WhatsApp: fast, IMessage: fast}, agentStore, log, o.now, rand.NewPCG(1, 2))
	if err != nil {
		w.t.Fatal(err)
	}
	agents.SetDispatcher(hub)
	if o.wrap != nil {
		hub.SetAgents(o.wrap(agents))
	} else {
		hub.SetAgents(agents)
	}
	w.devices.OnDelete(agents.Released)
	srv := httptest.NewServer(hub)
	n := &moveNode{w: w, hub: hub, agents: agents, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
	n.stop = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
		srv.Close()
	})
	w.t.Cleanup(n.stop)
	return n
}

// link dials the node with the token and says hello with the numbers.
func (n *moveNode) link(token string, numbers ...string) *websocket.Conn {
	n.w.t.Helper()
	return n.linkHolding(token, nil, numbers...)
}

// linkHolding is link with the hello's jobs (nil: none said, as an agent
// older than revision 1.42).
func (n *moveNode) linkHolding(token string, jobs []string, numbers ...string) *websocket.Conn {
	t := n.w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, n.url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	hello := proto.Hello{Protocol: 1, AppVersion: "agent test", Jobs: jobs}
	for _, num := range numbers {
		hello.WhatsApp = append(hello.WhatsApp, proto.WhatsAppNumber{Phone: num})
	}
	writeFrame(t, ws, hello)
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", w)
	}
	return ws
}

// send queues a WhatsApp send through the number and returns its id.
func (n *moveNode) send(text string) string {
	t := n.w.t
	t.Helper()
	ctx := context.Background()
	nums, err := n.agents.Numbers(ctx, n.w.company, channel.WhatsApp)
	if err != nil || len(nums) != 1 {
		t.Fatalf("numbers: %v (%v), want the one", nums, err)
	}
	m, _, err := n.agents.Send(ctx, channel.SendInput{CompanyID: n.w.company, Channel: channel.WhatsApp, NumberID: nums[0].PublicID,
		To: "+15551234567", Content: text}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m.UUID
}

// nextSend reads frames until a send and returns it.
func nextSend(t *testing.T, ws *websocket.Conn) *proto.Send {
	t.Helper()
	for {
		if s, ok := readFrame(t, ws).(*proto.Send); ok {
			return s
		}
	}
}

// reported acks the job and reports it sent, and waits for the status_ack.
func reported(t *testing.T, ws *websocket.Conn, id string) {
	t.Helper()
	writeFrame(t, ws, proto.Ack{ID: id})
	writeFrame(t, ws, proto.Status{ID: id, Status: proto.StatusSent, At: time.Now().UTC().Format(time.RFC3339)})
	for {
		switch f := readFrame(t, ws).(type) {
		case *proto.StatusAck:
			if f.ID == id {
				return
			}
		case *proto.Error:
			t.Fatalf("the report of %s: %+v", id, f)
		}
	}
}

// status is the message's stored status.
func (w *moveWorld) status(id string) string {
	w.t.Helper()
	m, err := w.st.MessageByUUID(w.company, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return m.Status
}

// TestAgentMoveKeepsAJobTheOldAgentWasHanded: agent A is handed a job and
// its link drops before the ack; the server restarts; agent B announces
// the number. B does not get the job (A may have journaled it), but gets
// a job never handed at once. A comes back, without the number, acks and
// reports the job: it is sent once, A's, and B still never gets it.
func TestAgentMoveKeepsAJobTheOldAgentWasHanded(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	tokenA, tokenB := w.pair("move-agent-a"), w.pair("move-agent-b")
	first := w.start()
	a := first.link(tokenA, moveNumber)
	taken := first.send("taken by A")
	if s := nextSend(t, a); s.ID != taken {
		t.Fatalf("A got %s, want %s", s.ID, taken)
	}
	a.CloseNow() // the ack never came
	first.stop()

	second := w.start()
	fresh := second.send("never handed")
	b := second.link(tokenB, moveNumber)
	// The number's queue holds the taken job first: were it B's, it
	// would come before the fresh one.
	if s := nextSend(t, b); s.ID != fresh {
		t.Fatalf("B got %s first, want the job never handed, %s (not %s, A's)", s.ID, fresh, taken)
	}
	reported(t, b, fresh)

	a = second.link(tokenA) // the number is B's now
	reported(t, a, taken)
	if got := w.status(taken); got != store.MsgSent {
		t.Fatalf("the job A reported: %s, want sent", got)
	}
	later := second.send("later")
	if s := nextSend(t, b); s.ID != later {
		t.Fatalf("B got %s, want %s: the job A sent must not reach B", s.ID, later)
	}
	reported(t, b, later)
}

// TestAgentMoveReleasesTheOldAgentsJobsOnItsDeletion: the job A was handed
// and never acked goes to B, which holds the number, once A is deleted.
func TestAgentMoveReleasesTheOldAgentsJobsOnItsDeletion(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	tokenA, tokenB := w.pair("del-agent-a"), w.pair("del-agent-b")
	node := w.start()
	a := node.link(tokenA, moveNumber)
	lost := node.send("lost by A")
	if s := nextSend(t, a); s.ID != lost {
		t.Fatalf("A got %s, want %s", s.ID, lost)
	}
	a.CloseNow()
	b := node.link(tokenB, moveNumber)
	fresh := node.send("fresh")
	if s := nextSend(t, b); s.ID != fresh {
		t.Fatalf("B got %s, want %s (not %s, A's)", s.ID, fresh, lost)
	}
	reported(t, b, fresh)
	if _, err := w.devices.Delete(context.Background(), w.company, "del-agent-a"); err != nil {
		t.Fatal(err)
	}
	if s := nextSend(t, b); s.ID != lost {
		t.Fatalf("B got %s after A's deletion, want A's job %s", s.ID, lost)
	}
	reported(t, b, lost)
	if got := w.status(lost); got != store.MsgSent {
		t.Fatalf("A's job after B reported it: %s, want sent", got)
	}
}

// TestAgentMoveBackHandsTheJobAgain: A, handed a job it did not ack, takes
// its number back (its hello announces it again): the job comes to it
// again, the agent dedupes it by id, and B never had it.
func TestAgentMoveBackHandsTheJobAgain(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	tokenA, tokenB := w.pair("back-agent-a"), w.pair("back-agent-b")
	node := w.start()
	a := node.link(tokenA, moveNumber)
	taken := node.send("taken by A")
	if s := nextSend(t, a); s.ID != taken {
		t.Fatalf("A got %s, want %s", s.ID, taken)
	}
	a.CloseNow()
	b := node.link(tokenB, moveNumber)
	fresh := node.send("fresh")
	if s := nextSend(t, b); s.ID != fresh {
		t.Fatalf("B got %s, want %s (not %s, A's)", s.ID, fresh, taken)
	}
	reported(t, b, fresh)
	a = node.link(tokenA, moveNumber)
	if s := nextSend(t, a); s.ID != taken {
		t.Fatalf("A, back with the number, got %s, want its job %s again", s.ID, taken)
	}
	reported(t, a, taken)
}

// TestAgentMoveReleasesTheJobsTheOldAgentDoesNotHold: A is handed two jobs
// and its link drops before either reached its journal; B takes the
// number. A comes back, without the number, saying in its hello that its
// journal holds one of them (revision 1.42): the other goes to B at once,
// the one A holds stays A's until it reports it, and B never gets it.
func TestAgentMoveReleasesTheJobsTheOldAgentDoesNotHold(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	tokenA, tokenB := w.pair("rel-agent-a"), w.pair("rel-agent-b")
	node := w.start()
	a := node.link(tokenA, moveNumber)
	lost, held := node.send("lost with A's link"), node.send("in A's journal")
	for _, want := range []string{lost, held} {
		if s := nextSend(t, a); s.ID != want {
			t.Fatalf("A got %s, want %s", s.ID, want)
		}
	}
	a.CloseNow()
	b := node.link(tokenB, moveNumber)
	fresh := node.send("fresh")
	if s := nextSend(t, b); s.ID != fresh {
		t.Fatalf("B got %s, want %s (not A's)", s.ID, fresh)
	}
	reported(t, b, fresh)

	a = node.linkHolding(tokenA, []string{held})
	if s := nextSend(t, b); s.ID != lost {
		t.Fatalf("B got %s once A said it does not hold it, want %s", s.ID, lost)
	}
	reported(t, b, lost)
	reported(t, a, held)
	later := node.send("later")
	if s := nextSend(t, b); s.ID != later {
		t.Fatalf("B got %s, want %s: the job A held must not reach B", s.ID, later)
	}
	reported(t, b, later)
	for id, want := range map[string]string{lost: store.MsgSent, held: store.MsgSent} {
		if got := w.status(id); got != want {
			t.Fatalf("job %s: %s, want %s", id, got, want)
		}
	}
}

// TestAgentHelloJobsBoundedTakesNoNumber: a hello naming more jobs than
// the protocol allows is refused (invalid_hello naming the field, close
// 4000), and refused whole, as one refused for a bad number is (PROTOCOL.md
// section 16.1): the numbers it announces stay with the agent that holds
// them, whose sends go on, rather than moving to an agent the refusal
// leaves without a link.
func TestAgentHelloJobsBoundedTakesNoNumber(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	holderToken, manyToken := w.pair("bound-holder"), w.pair("bound-many-jobs")
	node := w.start()
	holder := node.link(holderToken, moveNumber)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, node.url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + manyToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	jobs := make([]string, proto.MaxHelloJobs+1)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("job-%d", i)
	}
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "agent test", WhatsApp: []proto.WhatsAppNumber{{Phone: moveNumber}}, Jobs: jobs})
	if f, ok := readFrame(t, ws).(*proto.Error); !ok || f.Code != "invalid_hello" || f.Message != "hello.jobs must hold at most 1000 ids." {
		t.Fatalf("got %#v, want invalid_hello naming hello.jobs", f)
	}
	if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != proto.CloseProtocolError {
		t.Fatalf("the link ends with %v, want close %d", err, proto.CloseProtocolError)
	}
	nums, err := node.agents.Numbers(context.Background(), w.company, channel.WhatsApp)
	if err != nil || len(nums) != 1 || nums[0].Device != "bound-holder" {
		t.Fatalf("numbers after the refused hello: %+v (%v), want the one, still bound-holder's", nums, err)
	}
	id := node.send("for the holder")
	if s := nextSend(t, holder); s.ID != id {
		t.Fatalf("the holder got %s, want %s", s.ID, id)
	}
}

// TestAgentHelloBadEntryStoresNothing: a hello refused for a bad
// WhatsApp number or iMessage handle, or for numbers that would take the
// company past its bound, is refused whole (PROTOCOL.md section 16.1): the
// SIMs and app version it also carried are not stored, and the device
// shows those of its last hello that was taken; none of its numbers is.
func TestAgentHelloBadEntryStoresNothing(t *testing.T) {
	t.Parallel()
	// full gives the company all the handles it may have, held by
	// another agent.
	full := func(t *testing.T, w *moveWorld) {
		w.pair("full-holder")
		holder, err := w.devices.Get(context.Background(), w.company, "full-holder")
		if err != nil {
			t.Fatal(err)
		}
		handles := make([]string, channel.MaxNumbersPerCompany)
		for i := range handles {
			handles[i] = fmt.Sprintf("agent%d@example.com", i)
		}
		if _, err := w.st.AnnounceNumbers(w.company, holder.ID, channel.IMessage, handles, time.Now(), channel.MaxNumbersPerCompany); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name    string
		prepare func(*testing.T, *moveWorld)
		hello   proto.Hello
		field   string
	}{
		{"whatsapp", nil, proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: moveNumber}, {Phone: "not a number"}}}, "hello.whatsapp[1].phone"},
		{"imessage", nil, proto.Hello{IMessage: []proto.IMessageHandle{{Handle: "-x@example.com"}}}, "hello.imessage[0].handle"},
		{"past the company's bound", full, proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: moveNumber}}, IMessage: []proto.IMessageHandle{{Handle: "agent1@example.com"}, {Handle: "new@example.com"}}}, "hello.imessage would take the company past 1000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newMoveWorld(t)
			token := w.pair("bad-entry")
			if c.prepare != nil {
				c.prepare(t, w)
			}
			node := w.start()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			dial := func() *websocket.Conn {
				ws, _, err := websocket.Dial(ctx, node.url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ws.CloseNow() })
				return ws
			}
			first := dial()
			writeFrame(t, first, proto.Hello{Protocol: 1, AppVersion: "1.0.0", SIMs: []proto.SIM{{Slot: proto.SIM1, PhoneNumber: "+15550100001"}}})
			if f, ok := readFrame(t, first).(*proto.Welcome); !ok {
				t.Fatalf("got %#v, want a welcome", f)
			}
			first.Close(websocket.StatusNormalClosure, "")

			bad := c.hello
			bad.Protocol, bad.AppVersion, bad.SIMs = 1, "2.0.0", []proto.SIM{{Slot: proto.SIM2, PhoneNumber: "+15550100002"}}
			ws := dial()
			writeFrame(t, ws, bad)
			if f, ok := readFrame(t, ws).(*proto.Error); !ok || f.Code != "invalid_hello" || !strings.Contains(f.Message, c.field) {
				t.Fatalf("got %#v, want invalid_hello naming %s", f, c.field)
			}
			if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != proto.CloseProtocolError {
				t.Fatalf("the link ends with %v, want close %d", err, proto.CloseProtocolError)
			}
			d, err := w.devices.Get(ctx, w.company, "bad-entry")
			if err != nil {
				t.Fatal(err)
			}
			if d.AppVersion != "1.0.0" || len(d.SIMs) != 1 || d.SIMs[0].Slot != proto.SIM1 || d.SIMs[0].PhoneNumber != "+15550100001" {
				t.Fatalf("after the refused hello: app_version %q, sims %+v; want those of the hello before (1.0.0, SIM1 +15550100001)", d.AppVersion, d.SIMs)
			}
			nums, err := node.agents.Numbers(ctx, w.company, channel.WhatsApp)
			if err != nil || len(nums) != 0 {
				t.Fatalf("numbers after the refused hello: %+v (%v), want none", nums, err)
			}
		})
	}
}

// TestAgentMoveDisabledKeepsItsJobs: a disabled agent keeps the job it was
// handed (it may hold it in its journal and carry it out while it cannot
// link): the number's new holder does not get it. Enabled again, its
// hello says it holds nothing, and the job goes to the holder.
func TestAgentMoveDisabledKeepsItsJobs(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	tokenA, tokenB := w.pair("dis-agent-a"), w.pair("dis-agent-b")
	node := w.start()
	a := node.link(tokenA, moveNumber)
	lost := node.send("lost by A")
	if s := nextSend(t, a); s.ID != lost {
		t.Fatalf("A got %s, want %s", s.ID, lost)
	}
	a.CloseNow()
	set := func(status string) {
		t.Helper()
		if _, err := w.devices.Update(context.Background(), w.company, "dis-agent-a", device.Patch{Status: &status}); err != nil {
			t.Fatal(err)
		}
	}
	set(store.DeviceDisabled)
	b := node.link(tokenB, moveNumber)
	fresh := node.send("fresh")
	if s := nextSend(t, b); s.ID != fresh {
		t.Fatalf("B got %s, want %s (not %s, the disabled A's)", s.ID, fresh, lost)
	}
	reported(t, b, fresh)
	if got := w.status(lost); got != store.MsgQueued {
		t.Fatalf("the disabled agent's job: %s, want queued", got)
	}
	set(store.DeviceActive)
	node.linkHolding(tokenA, []string{})
	if s := nextSend(t, b); s.ID != lost {
		t.Fatalf("B got %s once A, enabled, said it holds nothing, want %s", s.ID, lost)
	}
	reported(t, b, lost)
}
