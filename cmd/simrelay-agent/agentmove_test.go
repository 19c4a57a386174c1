package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/agent/whatsapp"
	"github.com/simrelay/simrelay/agent/whatsapp/wafake"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// handedThenDropped links as the agent of config would, its hello holding
// number, queues a send through the number and reads it off the link: the
// server has handed it to the agent. The link is then dropped, before the
// agent's ack. It returns the send and the number's id.
func handedThenDropped(t *testing.T, srv *server, config, number, customer, text string) (*proto.Send, string) {
	t.Helper()
	cfg, err := agent.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	ws, _, err := websocket.Dial(ctx, cfg.WSURL, &websocket.DialOptions{HTTPClient: testhttp.Client,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + cfg.DeviceToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow() // the ack never goes
	write := func(f proto.Frame) {
		t.Helper()
		data, err := proto.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			t.Fatal(err)
		}
	}
	read := func() proto.Frame {
		t.Helper()
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := proto.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	write(proto.Hello{Protocol: 1, AppVersion: "agent move test", WhatsApp: []proto.WhatsAppNumber{{Phone: number}}})
	if f, ok := read().(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", f)
	}
	var numberID string
	until(t, "the number is online, the first agent's", func() bool { numberID = srv.agentID("whatsapp", number); return numberID != "" })
	id := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": text})
	for {
		if s, ok := read().(*proto.Send); ok && s.ID == id {
			return s, numberID
		}
	}
}

// runAgent runs a real agent on config, with the journal j, as a linked
// device of the WhatsApp number own (a fake WhatsApp); cancel stops it,
// and the test's end waits for it.
func runAgent(t *testing.T, ctx context.Context, cancel context.CancelFunc, config, own string, j *agent.Journal) *wafake.Fake {
	t.Helper()
	cfg, err := agent.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	fake := wafake.New(own)
	a := agent.New(agent.Options{Config: cfg, Transport: whatsapp.New(whatsapp.Config{Client: fake}), Journal: j,
		HTTPClient: testhttp.Client, BackoffMax: 500 * time.Millisecond, DeliveryPoll: 50 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return fake
}

// openJournal opens the journal of config, closed at the test's end (after
// the agent's: cleanups run last first).
func openJournal(t *testing.T, config string) *agent.Journal {
	t.Helper()
	j, err := agent.OpenJournal(agent.JournalPath(config), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// sentBy says whether the fake WhatsApp sent a text.
func sentBy(f *wafake.Fake, text string) bool {
	for _, m := range f.Sent() {
		if m.Msg.GetConversation() == text {
			return true
		}
	}
	return false
}

// TestWhatsAppNumberMovedWithAJobJournaled: agent A journaled a send whose
// ack was lost with its link, and its number moved to agent B (PROTOCOL.md
// section 16.1). B never sends it while A's registration exists, and goes
// on with the number's later sends; A, back without the number, carries
// the send out from its journal (its WhatsApp session is another number's
// now: account_unavailable) and its report is taken. The send went to one
// agent only.
func TestWhatsAppNumberMovedWithAJobJournaled(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	configA, configB := filepath.Join(t.TempDir(), "a.json"), filepath.Join(t.TempDir(), "b.json")
	srv.pair(agentBin, configA, "wa-move-a")
	srv.pair(agentBin, configB, "wa-move-b")
	const number, other, customer = "+15550100021", "+15550100022", "+15557654321"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A's link, as the agent's own would be: its hello holds the number;
	// the send written to it goes into A's journal, and the link is gone
	// before A's ack.
	send, numberID := handedThenDropped(t, srv, configA, number, customer, "journaled by A")
	journaled := send.ID
	jA := openJournal(t, configA)
	if fresh, err := jA.Take(*send, time.Now()); err != nil || !fresh {
		t.Fatalf("A's journal took the send: %v %v", fresh, err)
	}

	// B, a real agent, announces the number: the later send is its own,
	// the journaled one is not.
	fakeB := runAgent(t, ctx, cancel, configB, number, openJournal(t, configB))
	later := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": "later, B's"})
	until(t, "B sends the later send", func() bool { st, _ := srv.agentStatus("whatsapp", later); return st == "sent" })
	if sentBy(fakeB, "journaled by A") {
		t.Fatal("B sent the send A had journaled")
	}
	if st, _ := srv.agentStatus("whatsapp", journaled); st != "queued" {
		t.Fatalf("the send A journaled: %s, want queued, A's until it reports it", st)
	}

	// A comes back, its session another number's: its hello names the
	// send its journal holds, which stays its own; it carries the send out
	// and reports it; the report is taken.
	runAgent(t, ctx, cancel, configA, other, jA)
	until(t, "A's report of the journaled send is taken", func() bool {
		st, _ := srv.agentStatus("whatsapp", journaled)
		return st == "failed"
	})
	if _, errText := srv.agentStatus("whatsapp", journaled); errText != "account_unavailable" {
		t.Fatalf("the journaled send's error: %q, want account_unavailable (A's report)", errText)
	}
	if sentBy(fakeB, "journaled by A") {
		t.Fatal("B sent the send A had journaled and reported")
	}
}

// TestWhatsAppNumberMovedWithAJobLost: the server handed agent A a send
// and A's link died before the send reached A's journal; the number moved
// to agent B, which does not get the send while A's registration exists
// (A might hold it). A, a real agent, comes back without the number: its
// hello names the jobs its journal holds (PROTOCOL.md section 16.1), not
// this one, and the send goes to B at once, not after a day (its expiry)
// or A's deletion. It is sent once, by B.
func TestWhatsAppNumberMovedWithAJobLost(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	configA, configB := filepath.Join(t.TempDir(), "a.json"), filepath.Join(t.TempDir(), "b.json")
	srv.pair(agentBin, configA, "wa-lost-a")
	srv.pair(agentBin, configB, "wa-lost-b")
	const number, other, customer = "+15550100031", "+15550100032", "+15557654321"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	send, numberID := handedThenDropped(t, srv, configA, number, customer, "lost with A's link")
	lost := send.ID

	fakeB := runAgent(t, ctx, cancel, configB, number, openJournal(t, configB))
	later := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": "later, B's"})
	until(t, "B sends the later send", func() bool { st, _ := srv.agentStatus("whatsapp", later); return st == "sent" })
	if st, _ := srv.agentStatus("whatsapp", lost); st != "queued" || sentBy(fakeB, "lost with A's link") {
		t.Fatalf("the send handed to A: %s, sent by B %v; want queued, A's until A says it does not hold it", st, sentBy(fakeB, "lost with A's link"))
	}

	fakeA := runAgent(t, ctx, cancel, configA, other, openJournal(t, configA))
	until(t, "B sends the send A's link lost", func() bool {
		st, _ := srv.agentStatus("whatsapp", lost)
		return st == "sent" && sentBy(fakeB, "lost with A's link")
	})
	if sentBy(fakeA, "lost with A's link") {
		t.Fatal("A sent the send its link lost before its journal took it")
	}
}
