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
	cfgA, err := agent.LoadConfig(configA)
	if err != nil {
		t.Fatal(err)
	}
	dial, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	ws, _, err := websocket.Dial(dial, cfgA.WSURL, &websocket.DialOptions{HTTPClient: testhttp.Client,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + cfgA.DeviceToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	write := func(f proto.Frame) {
		t.Helper()
		data, err := proto.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.Write(dial, websocket.MessageText, data); err != nil {
			t.Fatal(err)
		}
	}
	read := func() proto.Frame {
		t.Helper()
		_, data, err := ws.Read(dial)
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
	until(t, "the number is online, A's", func() bool { numberID = srv.agentID("whatsapp", number); return numberID != "" })
	journaled := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": "journaled by A"})
	var send *proto.Send
	for send == nil {
		if s, ok := read().(*proto.Send); ok && s.ID == journaled {
			send = s
		}
	}
	jA, err := agent.OpenJournal(agent.JournalPath(configA), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jA.Close() }) // after the agent's end (cleanups run last first)
	if fresh, err := jA.Take(*send, time.Now()); err != nil || !fresh {
		t.Fatalf("A's journal took the send: %v %v", fresh, err)
	}
	ws.CloseNow() // the ack never went

	// B, a real agent, announces the number: the later send is its own,
	// the journaled one is not.
	run := func(config, own string, j *agent.Journal) *wafake.Fake {
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
	jB, err := agent.OpenJournal(agent.JournalPath(configB), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jB.Close() })
	fakeB := run(configB, number, jB)
	later := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": "later, B's"})
	until(t, "B sends the later send", func() bool { st, _ := srv.agentStatus("whatsapp", later); return st == "sent" })
	sentBy := func(f *wafake.Fake, text string) bool {
		for _, m := range f.Sent() {
			if m.Msg.GetConversation() == text {
				return true
			}
		}
		return false
	}
	if sentBy(fakeB, "journaled by A") {
		t.Fatal("B sent the send A had journaled")
	}
	if st, _ := srv.agentStatus("whatsapp", journaled); st != "queued" {
		t.Fatalf("the send A journaled: %s, want queued, A's until it reports it", st)
	}

	// A comes back, its session another number's: it carries the send out
	// from its journal and reports it; the report is taken.
	run(configA, other, jA)
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
