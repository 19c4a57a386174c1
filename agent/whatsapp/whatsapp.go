// Package whatsapp is the agent's WhatsApp transport: the agent is a linked
// device ("companion", like WhatsApp Web) of one WhatsApp account, through
// go.mau.fi/whatsmeow. It sends the jobs of that account's number, reports
// sent when WhatsApp's server accepted a message, delivered on the
// recipient's delivery receipt and delivered with detail read (or played)
// on a read receipt, and forwards the messages the account
// receives in one-to-one chats.
package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	gproto "google.golang.org/protobuf/proto"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// DefaultReceiptMemory bounds the receipts kept for messages whose job the
// core has not settled yet (a receipt can overtake the journal write of
// the send it is about): older ones are dropped first.
const DefaultReceiptMemory = 4096

// Config configures the transport.
type Config struct {
	Client Client
	Media  agent.MediaFetcher
	// MaxInboundMedia caps a received file the transport downloads
	// (agent.DefaultInboundMediaBytes when 0): a bigger one is announced
	// with its size and no bytes, and the agent forwards the text alone.
	MaxInboundMedia int64
	Logger          *slog.Logger
}

// Transport is the WhatsApp transport.
type Transport struct {
	cfg Config
	log *slog.Logger

	connectOnce sync.Once
	connectErr  error

	events chan *queued  // whatsmeow's events, in order, for Receive
	stop   chan struct{} // closed when Receive ends: the handler stops waiting

	mu       sync.Mutex
	receipts map[string]agent.Delivery // message id -> final delivery seen
	order    []string                  // receipt ids, oldest first
	loggedIn bool
}

// New returns the transport and registers its event handler on the client.
func New(cfg Config) *Transport {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInboundMedia <= 0 {
		cfg.MaxInboundMedia = agent.DefaultInboundMediaBytes
	}
	t := &Transport{cfg: cfg, log: cfg.Logger, events: make(chan *queued, 256), stop: make(chan struct{}),
		receipts: map[string]agent.Delivery{}}
	cfg.Client.AddEventHandler(t.handle)
	return t
}

// queued is an event waiting for Receive; done is closed once it was
// handled, and handled then says whether it was (journaled, for a message).
type queued struct {
	evt     any
	done    chan struct{}
	handled bool
}

// handle is whatsmeow's event handler: it hands the events the transport
// cares about to Receive, in order. whatsmeow calls it synchronously, so a
// full queue slows whatsmeow down rather than losing a message; for a
// received message it also waits until the message is in the journal, as
// whatsmeow acknowledges it to WhatsApp when the handler returns
// (SynchronousAck). A message that did not reach the journal (the journal
// failed, or the agent stopped first) is reported not handled: whatsmeow
// then sends WhatsApp no ack, and WhatsApp delivers it again, decrypted
// from whatsmeow's event buffer (NewClient).
func (t *Transport) handle(evt any) bool {
	_, isMsg := evt.(*events.Message)
	switch evt.(type) {
	case *events.Message, *events.Receipt, *events.LoggedOut, *events.Disconnected, *events.Connected,
		*events.StreamReplaced, *events.TemporaryBan:
	default:
		return true
	}
	q := &queued{evt: evt, done: make(chan struct{})}
	select {
	case t.events <- q:
	case <-t.stop:
		return !isMsg
	}
	if !isMsg {
		return true
	}
	select {
	case <-q.done:
		return q.handled
	case <-t.stop:
		return false
	}
}

// ClearedKeyRetention is how long the journal keeps the key of a received
// message ("wa:" and WhatsApp's message id) once the server acknowledged
// it. A message comes again only when whatsmeow did not acknowledge it to
// WhatsApp (the agent stopped between journaling it and the ack): WhatsApp
// keeps an undelivered message for 30 days at most and then deletes it
// (whatsmeow keeps its decrypted copy 14 days), and a chat's history,
// which WhatsApp sends a newly linked device, comes as a history sync,
// which the transport does not forward (handle). 45 days is past both.
func (t *Transport) ClearedKeyRetention() time.Duration { return ClearedKeyRetention }

// ClearedKeyRetention is Transport.ClearedKeyRetention.
const ClearedKeyRetention = 45 * 24 * time.Hour

// Name is "whatsapp".
func (t *Transport) Name() string { return "whatsapp" }

// Check needs a linked session; it connects once.
func (t *Transport) Check(ctx context.Context) error {
	if !t.cfg.Client.IsLoggedIn() {
		return errors.New("this WhatsApp session is not linked: run simrelay-agent whatsapp link and scan its QR code with WhatsApp (Settings > Linked devices)")
	}
	t.connectOnce.Do(func() {
		t.mu.Lock()
		t.loggedIn = true
		t.mu.Unlock()
		if err := t.cfg.Client.Connect(); err != nil {
			t.connectErr = fmt.Errorf("whatsapp: connect: %w", err)
		}
	})
	return t.connectErr
}

// Own is the linked account's number in E.164.
func (t *Transport) Own() string {
	jid := t.cfg.Client.Own()
	if jid.User == "" {
		return ""
	}
	return "+" + jid.User
}

// Inventory announces the linked account's number, while it is linked.
func (t *Transport) Inventory(ctx context.Context) (agent.Inventory, error) {
	t.mu.Lock()
	in := t.loggedIn
	t.mu.Unlock()
	own := t.Own()
	if !in || own == "" {
		return agent.Inventory{}, errors.New("whatsapp: not linked")
	}
	return agent.Inventory{WhatsApp: []proto.WhatsAppNumber{{Phone: own}}}, nil
}

// Execute sends one job from the linked number.
func (t *Transport) Execute(ctx context.Context, job agent.Job) (agent.Outcome, error) {
	failed := func(code string) (agent.Outcome, error) {
		return agent.Outcome{Status: proto.StatusFailed, Error: code}, nil
	}
	t.mu.Lock()
	in := t.loggedIn
	t.mu.Unlock()
	if !in || job.From != t.Own() {
		return failed("account_unavailable")
	}
	to, ok := phoneJID(job.To)
	if !ok {
		return failed("invalid_job")
	}
	// An unknown number is told apart from a failure: WhatsApp would
	// otherwise accept the message and never deliver it.
	if res, err := t.cfg.Client.IsOnWhatsApp(ctx, []string{job.To}); err == nil {
		if len(res) == 0 || !res[0].IsIn {
			return failed("not_on_whatsapp")
		}
		if res[0].JID.User != "" {
			to = res[0].JID
		}
	} else {
		t.log.Warn("whatsapp: could not check that the recipient has an account; sending anyway", "id", job.ID, "err", err)
	}
	msg, err := t.message(ctx, job)
	if err != nil {
		if errors.Is(err, agent.ErrMediaUnavailable) {
			t.log.Warn("whatsapp: media not sent", "id", job.ID, "err", err)
			return failed("media_unavailable")
		}
		return agent.Outcome{}, err
	}
	id, err := t.cfg.Client.SendMessage(ctx, to, msg)
	if errors.Is(err, whatsmeow.ErrMessageTimedOut) {
		// The message left; WhatsApp's answer did not come within
		// whatsmeow's 75 s: it may well have been delivered, so it is no
		// plain failure (which invites sending it again).
		t.log.Warn("whatsapp: no answer from WhatsApp to a message sent: outcome unknown", "id", job.ID, "err", err)
		return failed("outcome_unknown")
	}
	if err != nil {
		return agent.Outcome{}, fmt.Errorf("whatsapp: send: %w", err)
	}
	return agent.Outcome{Status: proto.StatusSent, Ref: string(id), AwaitDelivery: true}, nil
}

// message builds the WhatsApp message of a job: a plain text, or an
// uploaded media file of the job's content_type with the text as caption.
func (t *Transport) message(ctx context.Context, job agent.Job) (*waE2E.Message, error) {
	kind := job.ContentType
	if kind == "" || kind == "text" {
		return &waE2E.Message{Conversation: gproto.String(job.Message)}, nil
	}
	var mt whatsmeow.MediaType
	switch kind {
	case "image":
		mt = whatsmeow.MediaImage
	case "video":
		mt = whatsmeow.MediaVideo
	case "audio":
		mt = whatsmeow.MediaAudio
	case "document":
		mt = whatsmeow.MediaDocument
	default:
		return nil, fmt.Errorf("%w: content_type %q is not one of image, video, audio, document", agent.ErrMediaUnavailable, kind)
	}
	m, err := t.cfg.Media.Fetch(ctx, job.MediaURL)
	if err != nil {
		return nil, err
	}
	up, err := t.cfg.Client.Upload(ctx, m.Data, mt)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: upload: %w", err)
	}
	var caption *string
	if job.Message != "" {
		caption = gproto.String(job.Message)
	}
	size := gproto.Uint64(uint64(len(m.Data)))
	switch kind {
	case "image":
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: caption, Mimetype: gproto.String(m.MIME),
			URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256,
			FileSHA256: up.FileSHA256, FileLength: size}}, nil
	case "video":
		return &waE2E.Message{VideoMessage: &waE2E.VideoMessage{Caption: caption, Mimetype: gproto.String(m.MIME),
			URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256,
			FileSHA256: up.FileSHA256, FileLength: size}}, nil
	case "audio":
		// WhatsApp shows no caption under audio: the text, if any, is lost
		// (the server documents that a caption is for the other types).
		return &waE2E.Message{AudioMessage: &waE2E.AudioMessage{Mimetype: gproto.String(m.MIME),
			URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256,
			FileSHA256: up.FileSHA256, FileLength: size}}, nil
	default:
		return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{Caption: caption, Mimetype: gproto.String(m.MIME),
			FileName: gproto.String(m.Name), Title: gproto.String(m.Name),
			URL: &up.URL, DirectPath: &up.DirectPath, MediaKey: up.MediaKey, FileEncSHA256: up.FileEncSHA256,
			FileSHA256: up.FileSHA256, FileLength: size}}, nil
	}
}

// phoneJID is the user JID of an E.164 number.
func phoneJID(e164 string) (types.JID, bool) {
	digits := strings.TrimPrefix(e164, "+")
	if digits == "" || len(digits) > 15 || digits == e164 {
		return types.JID{}, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return types.JID{}, false
		}
	}
	return types.NewJID(digits, types.DefaultUserServer), true
}

// Recover cannot tell whether an interrupted send left: WhatsApp keeps no
// outbox the agent could read back. The job is reported outcome_unknown.
func (t *Transport) Recover(ctx context.Context, job agent.Job) (agent.Outcome, bool) {
	return agent.Outcome{}, false
}

// Delivery answers from the receipts seen so far: receipts are pushed
// (Sink.Deliver); this covers one that came before the job's journal
// entry named its message id.
func (t *Transport) Delivery(ctx context.Context, ref string) (agent.Delivery, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.receipts[ref]
	if ok {
		delete(t.receipts, ref)
	}
	return d, nil
}

// Acknowledge has nothing to clear: WhatsApp keeps the chat.
func (t *Transport) Acknowledge(ctx context.Context, msg agent.Received) error { return nil }

// Receive turns whatsmeow's events into the agent's frames until ctx ends,
// or returns an *agent.FatalError when the account logged this device out.
func (t *Transport) Receive(ctx context.Context, sink agent.Sink) error {
	// The handler stops waiting before whatsmeow is told to disconnect.
	var once sync.Once
	halt := func() { once.Do(func() { close(t.stop) }) }
	defer halt()
	for {
		select {
		case <-ctx.Done():
			halt()
			t.cfg.Client.Disconnect()
			return nil
		case q := <-t.events:
			err := t.event(ctx, q.evt, sink)
			q.handled = err == nil
			close(q.done)
			if err != nil {
				var fatal *agent.FatalError
				if errors.As(err, &fatal) {
					halt()
					t.cfg.Client.Disconnect()
					return err
				}
				t.log.Error("whatsapp: event not handled", "err", err)
			}
		}
	}
}

// event handles one of whatsmeow's events.
func (t *Transport) event(ctx context.Context, evt any, sink agent.Sink) error {
	switch e := evt.(type) {
	case *events.Message:
		msg, ok := Inbound(e, t.Own())
		if !ok {
			return nil
		}
		msg.Media = t.files(ctx, e.Message, msg.Key)
		return sink.Take([]agent.Received{msg}, "", "")
	case *events.Receipt:
		d, ok := ReceiptDelivery(e)
		if !ok {
			return nil
		}
		for _, id := range e.MessageIDs {
			t.remember(id, d)
			if err := sink.Deliver(id, d); err != nil {
				return err
			}
		}
		return nil
	case *events.LoggedOut:
		t.mu.Lock()
		t.loggedIn = false
		t.mu.Unlock()
		why := "from the phone, or by WhatsApp"
		if e.OnConnect {
			why = e.Reason.String()
		}
		return &agent.FatalError{Reason: fmt.Sprintf("whatsapp: this device was logged out of the account (%s): link it again with simrelay-agent whatsapp link", why)}
	case *events.StreamReplaced:
		return &agent.FatalError{Reason: "whatsapp: another program connected with this session's keys; stopping (only one copy of the session may run)"}
	case *events.TemporaryBan:
		t.log.Error("whatsapp: the account is temporarily banned", "reason", e.String())
	case *events.Disconnected:
		t.log.Warn("whatsapp: disconnected; whatsmeow reconnects")
	case *events.Connected:
		t.log.Info("whatsapp: connected", "number", t.Own())
	}
	return nil
}

// remember keeps a final delivery for Delivery, bounded; a later receipt
// with a newer detail (read after delivered) replaces it.
func (t *Transport) remember(id string, d agent.Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.receipts[id]; ok {
		if detailRank(d.Detail) > detailRank(old.Detail) {
			t.receipts[id] = d
		}
		return
	}
	t.receipts[id] = d
	t.order = append(t.order, id)
	for len(t.order) > DefaultReceiptMemory {
		delete(t.receipts, t.order[0])
		t.order = t.order[1:]
	}
}

// ReceiptDelivery maps a receipt to the delivery it proves: delivered for a
// delivery receipt of a message this account sent; delivered with detail
// read or played for a read or played receipt (a read implies the
// delivery; it may come alone when the delivery receipt was missed, and
// the core then reports the plain delivered first). Other receipts
// (retries, server errors, our own reads) prove nothing.
func ReceiptDelivery(e *events.Receipt) (agent.Delivery, bool) {
	detail := ""
	switch e.Type {
	case types.ReceiptTypeDelivered:
	case types.ReceiptTypeRead:
		detail = proto.DetailRead
	case types.ReceiptTypePlayed:
		detail = proto.DetailPlayed
	default:
		return agent.Delivery{}, false
	}
	if e.IsGroup {
		return agent.Delivery{}, false
	}
	return agent.Delivery{Final: true, Status: proto.StatusDelivered, Detail: detail}, true
}

// detailRank orders details: played implies read.
func detailRank(d string) int {
	switch d {
	case proto.DetailRead:
		return 1
	case proto.DetailPlayed:
		return 2
	}
	return 0
}

// Inbound maps a received message to what the agent forwards: one-to-one
// chats only (groups, broadcasts and status updates are not a customer
// writing to the number), never this account's own messages, the text or
// a media's caption, from the sender's phone number. own is the receiving
// number (E.164).
func Inbound(e *events.Message, own string) (agent.Received, bool) {
	if e == nil || e.Message == nil || e.Info.IsFromMe || e.Info.IsGroup || e.Info.Chat.Server == types.BroadcastServer {
		return agent.Received{}, false
	}
	from := e.Info.Sender
	if from.Server != types.DefaultUserServer && e.Info.SenderAlt.Server == types.DefaultUserServer {
		// A sender known by a hidden id (LID) also carries its number.
		from = e.Info.SenderAlt
	}
	if from.Server != types.DefaultUserServer || from.User == "" {
		return agent.Received{}, false
	}
	text, ok := messageText(e.Message)
	if !ok {
		return agent.Received{}, false
	}
	at := e.Info.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	return agent.Received{Key: "wa:" + string(e.Info.ID), Channel: proto.ChannelWhatsApp, From: "+" + from.User,
		To: own, Text: text, At: at}, true
}

// files downloads the media of a received message (none for text): at
// most MaxInboundMedia bytes, judged by the size the message announces
// before anything is downloaded. A file that cannot be downloaded is
// logged and left out; the text still goes.
func (t *Transport) files(ctx context.Context, m *waE2E.Message, key string) []agent.File {
	var (
		d    whatsmeow.DownloadableMessage
		f    agent.File
		size uint64
	)
	switch {
	case m.ImageMessage != nil:
		d, f.ContentType, size = m.ImageMessage, m.ImageMessage.GetMimetype(), m.ImageMessage.GetFileLength()
	case m.VideoMessage != nil:
		d, f.ContentType, size = m.VideoMessage, m.VideoMessage.GetMimetype(), m.VideoMessage.GetFileLength()
	case m.AudioMessage != nil:
		d, f.ContentType, size = m.AudioMessage, m.AudioMessage.GetMimetype(), m.AudioMessage.GetFileLength()
	case m.DocumentMessage != nil:
		d, f.ContentType, size = m.DocumentMessage, m.DocumentMessage.GetMimetype(), m.DocumentMessage.GetFileLength()
		f.Filename = m.DocumentMessage.GetFileName()
	default:
		return nil
	}
	f.Size = int64(min(size, uint64(1)<<62))
	if f.Size > t.cfg.MaxInboundMedia {
		return []agent.File{f} // the agent logs it and forwards the text
	}
	ctx, cancel := context.WithTimeout(ctx, agent.DefaultMediaTimeout)
	defer cancel()
	// The file is encrypted and padded: at most 16 bytes of padding and a
	// 10-byte MAC over its size.
	data, err := t.cfg.Client.Download(withMediaLimit(ctx, t.cfg.MaxInboundMedia+32), d)
	if err != nil {
		t.log.Warn("whatsapp: received media not downloaded; the text is forwarded without it", "key", key, "err", err)
		return nil
	}
	f.Data = data
	return []agent.File{f}
}

// messageText is a message's text, or a media's caption ("" when it has
// none); ok is false for what is not a message (reactions, protocol
// messages, receipts of polls...).
func messageText(m *waE2E.Message) (string, bool) {
	switch {
	case m.Conversation != nil:
		return m.GetConversation(), true
	case m.ExtendedTextMessage != nil:
		return m.GetExtendedTextMessage().GetText(), true
	case m.ImageMessage != nil:
		return m.GetImageMessage().GetCaption(), true
	case m.VideoMessage != nil:
		return m.GetVideoMessage().GetCaption(), true
	case m.DocumentMessage != nil:
		return m.GetDocumentMessage().GetCaption(), true
	case m.AudioMessage != nil:
		return "", true
	}
	return "", false
}
