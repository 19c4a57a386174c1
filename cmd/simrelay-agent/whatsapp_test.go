package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	gproto "google.golang.org/protobuf/proto"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/agent/whatsapp"
	"github.com/simrelay/simrelay/agent/whatsapp/wafake"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// TestWhatsAppThroughTheAgent runs the agent core with the WhatsApp
// transport against a real simrelay serve. The WhatsApp session is a fake
// client behind the transport's Client interface: nothing here reaches
// WhatsApp. It plays whatsmeow's own event structs (receipts, messages,
// logged out) into the transport.
func TestWhatsAppThroughTheAgent(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	hooks := newWebhookSink(t, srv)
	config := filepath.Join(t.TempDir(), "agent.json")
	srv.pair(agentBin, config, "wa-agent")

	cfg, err := agent.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Salt = "s1"
	j, err := agent.OpenJournal(agent.JournalPath(config), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const own, customer = "+15550100001", "+15557654321"
	fake := wafake.New(own)
	tr := whatsapp.New(whatsapp.Config{Client: fake})
	a := agent.New(agent.Options{Config: cfg, Transport: tr, Journal: j, HTTPClient: testhttp.Client,
		BackoffMax: 500 * time.Millisecond, DeliveryPoll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	var numberID string
	until(t, "the number is listed online", func() bool { numberID = srv.agentID("whatsapp", own); return numberID != "" })

	// A REST send reaches WhatsApp's SendMessage with the customer's JID
	// and the text; it is sent, then delivered on the delivery receipt.
	id := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": "Your order has shipped"})
	until(t, "the fake client is given the message", func() bool { return len(fake.Sent()) == 1 })
	sent := fake.Sent()[0]
	if sent.To != types.NewJID("15557654321", types.DefaultUserServer) || sent.Msg.GetConversation() != "Your order has shipped" {
		t.Fatalf("sent %v %v", sent.To, sent.Msg)
	}
	until(t, "the send is sent", func() bool { st, _ := srv.agentStatus("whatsapp", id); return st == "sent" })
	fake.Emit(&events.Receipt{MessageSource: types.MessageSource{Chat: sent.To, Sender: sent.To},
		MessageIDs: []types.MessageID{sent.ID}, Type: types.ReceiptTypeDelivered, Timestamp: time.Now()})
	until(t, "the send is delivered", func() bool { st, _ := srv.agentStatus("whatsapp", id); return st == "delivered" })

	// The read receipt is reported as delivered with detail read; the
	// journal keeps the report until its status_ack.
	fake.Emit(&events.Receipt{MessageSource: types.MessageSource{Chat: sent.To, Sender: sent.To},
		MessageIDs: []types.MessageID{sent.ID}, Type: types.ReceiptTypeRead, Timestamp: time.Now()})
	until(t, "the send shows detail read", func() bool { return agentDetail(srv, id) == "delivered/read" })
	until(t, "the journal forgets the acknowledged reports", func() bool { r, err := j.Reports(); return err == nil && len(r) == 0 })

	// Media on a loopback address is refused by the server, so no agent is
	// asked to fetch it (downloads are covered by agent/whatsapp's tests).
	if code, b, _ := srv.call("POST", "/whatsapp/send", map[string]any{"number_id": numberID, "to": customer, "content": "the label", "type": "image", "media_url": "https://127.0.0.1:8443/label.png"}); code != http.StatusBadRequest || !strings.Contains(string(b), `"field":"media_url"`) {
		t.Fatalf("a loopback media_url: got %d %s, want 400 naming media_url", code, b)
	}

	// A read receipt that comes alone (the delivery receipt was missed)
	// reports delivered, then the detail.
	alone := srv.agentSend("whatsapp", map[string]any{"number_id": numberID, "to": customer, "content": "Read me"})
	until(t, "the second text is sent", func() bool { st, _ := srv.agentStatus("whatsapp", alone); return st == "sent" })
	var aloneSent wafake.FakeSent
	for _, m := range fake.Sent() {
		if m.Msg.GetConversation() == "Read me" {
			aloneSent = m
		}
	}
	fake.Emit(&events.Receipt{MessageSource: types.MessageSource{Chat: aloneSent.To, Sender: aloneSent.To},
		MessageIDs: []types.MessageID{aloneSent.ID}, Type: types.ReceiptTypeRead, Timestamp: time.Now()})
	until(t, "the second text shows delivered/read", func() bool { return agentDetail(srv, alone) == "delivered/read" })

	// A received message reaches the webhooks as whatsapp.received, once.
	fake.Emit(&events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: sent.To, Sender: sent.To},
		ID: "3EB0C767D26A1D0B8E41", Timestamp: time.Now()}, Message: &waE2E.Message{Conversation: gproto.String("Where is my order?")}})
	until(t, "the webhook gets whatsapp.received", func() bool { return hooks.hookCount("whatsapp.received", "Where is my order?") > 0 })

	// Logged out: the agent stops with a clear error instead of looping.
	fake.Emit(&events.LoggedOut{OnConnect: false})
	select {
	case err := <-done:
		var fatal *agent.FatalError
		if !errors.As(err, &fatal) {
			t.Fatalf("Run after logged out: %v, want a FatalError", err)
		}
		t.Logf("stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop after the session was logged out")
	}
	if n := hooks.hookCount("whatsapp.received", "Where is my order?"); n != 1 {
		t.Fatalf("webhook deliveries of the message: %d, want 1", n)
	}
}

// agentDetail is a WhatsApp message's "status/detail" in the API ("" when
// it cannot be read).
func agentDetail(srv *server, id string) string {
	code, b, err := srv.call("GET", "/whatsapp/messages/"+id, nil)
	if err != nil || code != http.StatusOK {
		return ""
	}
	var m struct {
		Status string  `json:"status"`
		Detail *string `json:"detail"`
	}
	if json.Unmarshal(b, &m) != nil || m.Detail == nil {
		return m.Status + "/"
	}
	return m.Status + "/" + *m.Detail
}
