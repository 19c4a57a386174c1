package whatsapp_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/proto/waHistorySync"
	"go.mau.fi/whatsmeow/proto/waWeb"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	gproto "google.golang.org/protobuf/proto"

	"github.com/simrelay/simrelay/agent"
	. "github.com/simrelay/simrelay/agent/whatsapp"
	"github.com/simrelay/simrelay/agent/whatsapp/wafake"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// These tests build whatsmeow's own event structs and a fake client; no
// WhatsApp server is contacted.

const own = "+15550100001"

func user(n string) types.JID { return types.NewJID(n, types.DefaultUserServer) }

func TestInboundMapsWhatsmeowMessages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)
	info := func(src types.MessageSource) types.MessageInfo {
		return types.MessageInfo{MessageSource: src, ID: "3EB0C767D26A1D0B8E41", Timestamp: at}
	}
	direct := types.MessageSource{Chat: user("15557654321"), Sender: user("15557654321")}
	text := &waE2E.Message{Conversation: gproto.String("Where is my order?")}

	got, ok := Inbound(&events.Message{Info: info(direct), Message: text}, own)
	want := agent.Received{Key: "wa:3EB0C767D26A1D0B8E41", Channel: proto.ChannelWhatsApp, From: "+15557654321", To: own, Text: "Where is my order?", At: at}
	if !ok || got.Key != want.Key || got.From != want.From || got.To != want.To || got.Text != want.Text || !got.At.Equal(at) || got.Channel != want.Channel {
		t.Fatalf("direct text: got %+v %v, want %+v", got, ok, want)
	}
	// Extended text and a caption are the text.
	got, _ = Inbound(&events.Message{Info: info(direct), Message: &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: gproto.String("link https://x.example")}}}, own)
	if got.Text != "link https://x.example" {
		t.Fatalf("extended text: %q", got.Text)
	}
	got, _ = Inbound(&events.Message{Info: info(direct), Message: &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: gproto.String("the label")}}}, own)
	if got.Text != "the label" {
		t.Fatalf("image caption: %q", got.Text)
	}
	// A sender known by its LID carries its number in SenderAlt.
	lid := types.MessageSource{Chat: types.NewJID("123456789", types.HiddenUserServer), Sender: types.NewJID("123456789", types.HiddenUserServer), SenderAlt: user("15557654321")}
	got, ok = Inbound(&events.Message{Info: info(lid), Message: text}, own)
	if !ok || got.From != "+15557654321" {
		t.Fatalf("LID sender: got %+v %v", got, ok)
	}
	// Not forwarded: our own messages, groups, status broadcasts, reactions.
	for name, e := range map[string]*events.Message{
		"from me":  {Info: info(types.MessageSource{Chat: user("15557654321"), Sender: user("15550100001"), IsFromMe: true}), Message: text},
		"group":    {Info: info(types.MessageSource{Chat: types.NewJID("1203630", types.GroupServer), Sender: user("15557654321"), IsGroup: true}), Message: text},
		"status":   {Info: info(types.MessageSource{Chat: types.StatusBroadcastJID, Sender: user("15557654321")}), Message: text},
		"reaction": {Info: info(direct), Message: &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: gproto.String("👍")}}},
	} {
		if got, ok := Inbound(e, own); ok {
			t.Errorf("%s: forwarded %+v", name, got)
		}
	}
}

func TestReceiptsMapToDelivered(t *testing.T) {
	t.Parallel()
	src := types.MessageSource{Chat: user("15557654321"), Sender: user("15557654321")}
	for _, tc := range []struct {
		typ    types.ReceiptType
		want   bool
		detail string
	}{
		{types.ReceiptTypeDelivered, true, ""}, {types.ReceiptTypeRead, true, proto.DetailRead}, {types.ReceiptTypePlayed, true, proto.DetailPlayed},
		{types.ReceiptTypeRetry, false, ""}, {types.ReceiptTypeServerError, false, ""}, {types.ReceiptTypeReadSelf, false, ""}, {types.ReceiptTypeSender, false, ""},
	} {
		d, ok := ReceiptDelivery(&events.Receipt{MessageSource: src, MessageIDs: []types.MessageID{"A"}, Type: tc.typ})
		if ok != tc.want || ok && (d.Status != proto.StatusDelivered || !d.Final || d.Detail != tc.detail) {
			t.Errorf("receipt %q: got %+v %v, want delivered=%v detail %q", tc.typ, d, ok, tc.want, tc.detail)
		}
	}
}

// recSink records what the transport hands the core.
type recSink struct {
	took      chan agent.Received
	delivered chan string
}

func (s *recSink) Take(msgs []agent.Received, k, v string) error {
	for _, m := range msgs {
		s.took <- m
	}
	return nil
}
func (s *recSink) Mark(string) (string, error)     { return "", nil }
func (s *recSink) Seen(string) (agent.Seen, error) { return agent.SeenNew, nil }
func (s *recSink) Deliver(ref string, d agent.Delivery) error {
	s.delivered <- ref + " " + d.Status
	return nil
}

func TestEventsReachTheSinkAndLoggedOutStops(t *testing.T) {
	t.Parallel()
	fake := wafake.New(own)
	tr := New(Config{Client: fake})
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	inv, err := tr.Inventory(context.Background())
	if err != nil || len(inv.WhatsApp) != 1 || inv.WhatsApp[0].Phone != own {
		t.Fatalf("inventory %+v %v", inv, err)
	}
	s := &recSink{took: make(chan agent.Received, 4), delivered: make(chan string, 4)}
	done := make(chan error, 1)
	go func() { done <- tr.Receive(context.Background(), s) }()

	fake.Emit(&events.Connected{})
	fake.Emit(&events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: user("15557654321"), Sender: user("15557654321")}, ID: "M1"},
		Message: &waE2E.Message{Conversation: gproto.String("hi")}})
	if m := <-s.took; m.Key != "wa:M1" || m.Text != "hi" || m.To != own {
		t.Fatalf("took %+v", m)
	}
	fake.Emit(&events.Receipt{MessageSource: types.MessageSource{Chat: user("15557654321"), Sender: user("15557654321")}, MessageIDs: []types.MessageID{"S1"}, Type: types.ReceiptTypeDelivered})
	if d := <-s.delivered; d != "S1 delivered" {
		t.Fatalf("delivered %q", d)
	}
	// The receipt is also remembered, for a job settled after it came.
	if d, _ := tr.Delivery(context.Background(), "S1"); !d.Final || d.Status != proto.StatusDelivered {
		t.Fatalf("Delivery(S1) = %+v", d)
	}
	fake.Emit(&events.Disconnected{}) // logged; whatsmeow reconnects by itself
	fake.Emit(&events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut})
	select {
	case err := <-done:
		var fatal *agent.FatalError
		if !errors.As(err, &fatal) {
			t.Fatalf("Receive after LoggedOut: %v, want a FatalError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not stop after LoggedOut")
	}
	if _, err := tr.Inventory(context.Background()); err == nil {
		t.Fatal("a logged-out transport still announces its number")
	}
}

func TestExecuteSendsTextAndMedia(t *testing.T) {
	t.Parallel()
	media := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big.png" {
			w.Write(make([]byte, 2048))
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("PNGDATA"))
	}))
	defer media.Close()
	fake := wafake.New(own)
	fake.NotOnWhatsApp["+15550009999"] = true
	// The media server is on loopback: allowed here, as --media-allow-private does.
	roots := x509.NewCertPool()
	roots.AddCert(media.Certificate())
	tr := New(Config{Client: fake, Media: agent.MediaFetcher{RootCAs: roots, AllowPrivate: true, MaxBytes: 1024}})
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	job := func(to, kind, url string) agent.Job {
		return agent.Job{Send: proto.Send{ID: "j", Channel: proto.ChannelWhatsApp, From: own, To: to, Message: "caption", ContentType: kind, MediaURL: url}}
	}
	out, err := tr.Execute(context.Background(), job("+15557654321", "text", ""))
	if err != nil || out.Status != proto.StatusSent || !out.AwaitDelivery || out.Ref == "" {
		t.Fatalf("text: %+v %v", out, err)
	}
	out, err = tr.Execute(context.Background(), job("+15557654321", "image", media.URL+"/label.png"))
	if err != nil || out.Status != proto.StatusSent {
		t.Fatalf("image: %+v %v", out, err)
	}
	sent := fake.Sent()
	if len(sent) != 2 || sent[0].To != user("15557654321") || sent[0].Msg.GetConversation() != "caption" {
		t.Fatalf("sent %+v", sent)
	}
	if im := sent[1].Msg.GetImageMessage(); im == nil || im.GetCaption() != "caption" || im.GetMimetype() != "image/png" || im.GetFileLength() != 7 {
		t.Fatalf("image message %+v", sent[1].Msg)
	}
	if up := fake.Uploads(); len(up) != 1 || string(up[0]) != "PNGDATA" {
		t.Fatalf("uploads %q", up)
	}
	for name, tc := range map[string]struct {
		job  agent.Job
		want string
	}{
		"not on whatsapp": {job("+15550009999", "text", ""), "not_on_whatsapp"},
		"other number":    {agent.Job{Send: proto.Send{ID: "j", Channel: proto.ChannelWhatsApp, From: "+15550100002", To: "+15557654321", Message: "x"}}, "account_unavailable"},
		"http media":      {job("+15557654321", "image", "http://example.com/a.png"), "media_unavailable"},
		"media too big":   {job("+15557654321", "document", media.URL+"/big.png"), "media_unavailable"},
		"media not found": {job("+15557654321", "video", "https://127.0.0.1:1/none.mp4"), "media_unavailable"},
	} {
		out, err := tr.Execute(context.Background(), tc.job)
		if err != nil || out.Status != proto.StatusFailed || out.Error != tc.want {
			t.Errorf("%s: %+v %v, want failed %s", name, out, err, tc.want)
		}
	}
}

// failSink fails its first Take, as a journal that cannot write.
type failSink struct {
	recSink
	failed bool
}

func (s *failSink) Take(msgs []agent.Received, k, v string) error {
	if !s.failed {
		s.failed = true
		return errors.New("journal: disk full")
	}
	return s.recSink.Take(msgs, k, v)
}

// A received message is acknowledged to WhatsApp only once it is in the
// journal: one the journal failed to take, or one that came as the agent
// stopped, is reported not handled, so whatsmeow sends no ack and WhatsApp
// delivers it again. The handler returned normally either way, and
// whatsmeow acknowledged a message the agent never kept.
func TestMessageNotJournaledIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	fake := wafake.New(own)
	tr := New(Config{Client: fake})
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &failSink{recSink: recSink{took: make(chan agent.Received, 4), delivered: make(chan string, 4)}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Receive(ctx, s) }()
	msg := func(id types.MessageID) *events.Message {
		return &events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: user("15557654321"), Sender: user("15557654321")}, ID: id},
			Message: &waE2E.Message{Conversation: gproto.String("hi")}}
	}
	if fake.Emit(msg("M1")) {
		t.Fatal("a message the journal failed to take was acknowledged")
	}
	if !fake.Emit(msg("M1")) { // delivered again
		t.Fatal("a journaled message was not acknowledged")
	}
	if m := <-s.took; m.Key != "wa:M1" {
		t.Fatalf("took %+v", m)
	}
	if !fake.Emit(&events.Connected{}) {
		t.Fatal("an event other than a message was reported not handled")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if fake.Emit(msg("M2")) {
		t.Fatal("a message that came as the agent stopped was acknowledged")
	}
}

// A message whatsmeow wrote to WhatsApp without an answer in its 75 s may
// have gone: it is reported failed outcome_unknown, not generic_failure.
func TestSendWithoutWhatsAppsAnswerIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	fake := wafake.New(own)
	fake.SendErr = whatsmeow.ErrMessageTimedOut
	tr := New(Config{Client: fake})
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, err := tr.Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", Channel: proto.ChannelWhatsApp, From: own, To: "+15557654321", Message: "hi"}})
	if err != nil || out.Status != proto.StatusFailed || out.Error != "outcome_unknown" {
		t.Fatalf("got %+v, %v; want failed outcome_unknown", out, err)
	}
}

// The journal forgets a received message's key ClearedKeyRetention after
// the server stored it (agent.ClearedKeys). A chat's history, which
// WhatsApp sends a linked device, comes as a history sync and is not
// forwarded: only a message WhatsApp delivers again (never acknowledged,
// kept 30 days at most) comes back, and that is well within the
// retention.
func TestHistorySyncIsNotForwarded(t *testing.T) {
	t.Parallel()
	var _ agent.ClearedKeys = (*Transport)(nil)
	if ClearedKeyRetention <= 30*24*time.Hour {
		t.Fatalf("ClearedKeyRetention %v: not past the 30 days WhatsApp keeps an undelivered message", ClearedKeyRetention)
	}
	fake := wafake.New(own)
	tr := New(Config{Client: fake})
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &recSink{took: make(chan agent.Received, 4), delivered: make(chan string, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Receive(ctx, s) }()
	if !fake.Emit(&events.HistorySync{Data: &waHistorySync.HistorySync{Conversations: []*waHistorySync.Conversation{{
		ID: gproto.String("15557654321@s.whatsapp.net"),
		Messages: []*waHistorySync.HistorySyncMsg{{Message: &waWeb.WebMessageInfo{
			Key:     &waCommon.MessageKey{RemoteJID: gproto.String("15557654321@s.whatsapp.net"), ID: gproto.String("OLD1")},
			Message: &waE2E.Message{Conversation: gproto.String("an old message")}}}},
	}}}}) {
		t.Fatal("a history sync was reported not handled")
	}
	fake.Emit(&events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: user("15557654321"), Sender: user("15557654321")}, ID: "NEW1"},
		Message: &waE2E.Message{Conversation: gproto.String("hi")}})
	if m := <-s.took; m.Key != "wa:NEW1" {
		t.Fatalf("took %+v, want only the new message", m)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive: %v", err)
	}
	select {
	case m := <-s.took:
		t.Fatalf("took %+v as well", m)
	default:
	}
}
