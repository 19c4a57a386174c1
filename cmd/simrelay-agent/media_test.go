package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
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
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// pngFile sniffs as image/png; pdfFile is a document.
var (
	pngFile = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{9}, 2000)...)
	pdfFile = []byte("%PDF-1.4\n" + strings.Repeat("q", 700))
)

// hookMedia is one file of a webhook delivery.
type hookMedia struct {
	ID           string `json:"id"`
	ContentType  string `json:"content_type"`
	Size         int64  `json:"size"`
	Filename     string `json:"filename"`
	URL          string `json:"url"`
	URLExpiresAt string `json:"url_expires_at"`
}

// mediaOf is the media list of the webhook delivery that mentions text.
func (w *webhookSink) mediaOf(text string) ([]hookMedia, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bodies {
		if !strings.Contains(b, text) {
			continue
		}
		var body struct {
			Data struct {
				Message string      `json:"message"`
				Media   []hookMedia `json:"media"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(b), &body) == nil && body.Data.Message == text {
			return body.Data.Media, true
		}
	}
	return nil, false
}

// fetch GETs a URL, with the company's key when auth is set.
func (s *server) fetch(u string, auth bool) (*http.Response, []byte) {
	s.t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	res, err := (&http.Client{Transport: testhttp.Transport, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return res, b
}

// checkServed fails unless a webhook file's signed link and GET /media/{id}
// (with the company's key) both serve want, the link without a credential.
func checkServed(t *testing.T, srv *server, f hookMedia, want []byte, contentType, disposition string) {
	t.Helper()
	if f.URL == "" || f.URLExpiresAt == "" || f.ContentType != contentType || f.Size != int64(len(want)) {
		t.Fatalf("webhook file: got %+v, want %s of %d bytes with a signed link", f, contentType, len(want))
	}
	for _, c := range []struct {
		u    string
		auth bool
	}{{f.URL, false}, {srv.url + "/media/" + f.ID, true}} {
		res, b := srv.fetch(c.u, c.auth)
		if res.StatusCode != http.StatusOK || !bytes.Equal(b, want) || res.Header.Get("Content-Type") != contentType ||
			!strings.HasPrefix(res.Header.Get("Content-Disposition"), disposition) || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: got %d %v (%d bytes)", c.u, res.StatusCode, res.Header, len(b))
		}
	}
	if res, _ := srv.fetch(srv.url+"/media/"+f.ID, false); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /media/%s without a credential or signature: got %d, want 401", f.ID, res.StatusCode)
	}
}

// TestWhatsAppInboundMedia: an image and a document received on WhatsApp
// (the fake client stands for whatsmeow, downloads included) are uploaded
// by the agent and reach the webhook with working signed links and GET
// /media/{id}; a file over the agent's cap is not downloaded, the log says
// so, and the message's text still arrives.
func TestWhatsAppInboundMedia(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	hooks := newWebhookSink(t, srv)
	config := filepath.Join(t.TempDir(), "agent.json")
	srv.pair(agentBin, config, "wa-media")
	cfg, err := agent.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	j, err := agent.OpenJournal(agent.JournalPath(config), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const own = "+15550100001"
	const max = 64 << 10
	fake := wafake.New(own)
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	tr := whatsapp.New(whatsapp.Config{Client: fake, MaxInboundMedia: max, Logger: log})
	a := agent.New(agent.Options{Config: cfg, Transport: tr, Journal: j, HTTPClient: testhttp.Client, Logger: log, InboundMediaBytes: max,
		BackoffMax: 500 * time.Millisecond, DeliveryPoll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	}()
	until(t, "the number is listed online", func() bool { return srv.agentID("whatsapp", own) != "" })

	customer := types.NewJID("15557654321", types.DefaultUserServer)
	msg := func(id string, m *waE2E.Message) *events.Message {
		return &events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: customer, Sender: customer},
			ID: types.MessageID(id), Timestamp: time.Now()}, Message: m}
	}
	fake.AddMedia("/img/1", pngFile)
	fake.AddMedia("/doc/1", pdfFile)
	fake.Emit(msg("3EB0IMG1", &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: gproto.String("the damaged box"),
		Mimetype: gproto.String("image/png"), DirectPath: gproto.String("/img/1"), FileLength: gproto.Uint64(uint64(len(pngFile)))}}))
	fake.Emit(msg("3EB0DOC1", &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{Caption: gproto.String("my invoice"),
		Mimetype: gproto.String("application/pdf"), FileName: gproto.String("invoice.pdf"), DirectPath: gproto.String("/doc/1"),
		FileLength: gproto.Uint64(uint64(len(pdfFile)))}}))

	var img, doc []hookMedia
	until(t, "the webhook gets both messages with their files", func() bool {
		var ok1, ok2 bool
		img, ok1 = hooks.mediaOf("the damaged box")
		doc, ok2 = hooks.mediaOf("my invoice")
		return ok1 && ok2
	})
	if len(img) != 1 || len(doc) != 1 || doc[0].Filename != "invoice.pdf" {
		t.Fatalf("webhook media: got %+v and %+v", img, doc)
	}
	checkServed(t, srv, img[0], pngFile, "image/png", "inline")
	checkServed(t, srv, doc[0], pdfFile, "application/pdf", "attachment; filename=invoice.pdf")

	// Over the cap: not downloaded, logged, and the text arrives alone.
	downloads := fake.Downloads()
	fake.Emit(msg("3EB0BIG1", &waE2E.Message{VideoMessage: &waE2E.VideoMessage{Caption: gproto.String("a long video"),
		Mimetype: gproto.String("video/mp4"), DirectPath: gproto.String("/vid/1"), FileLength: gproto.Uint64(max + 1)}}))
	until(t, "the text of the big video arrives", func() bool { _, ok := hooks.mediaOf("a long video"); return ok })
	if m, _ := hooks.mediaOf("a long video"); len(m) != 0 || fake.Downloads() != downloads {
		t.Fatalf("an over-cap file: got media %+v and %d downloads, want none", m, fake.Downloads()-downloads)
	}
	if !strings.Contains(logs.String(), "received file not forwarded: it is over the size cap") || !strings.Contains(logs.String(), "max_bytes=65536") {
		t.Fatalf("no log line names the refused file:\n%s", logs.String())
	}
	// The spooled files are gone once uploaded.
	until(t, "the spool is empty", func() bool {
		left, _ := filepath.Glob(filepath.Join(agent.JournalPath(config)+".media", "*"))
		return len(left) == 0
	})
}

// addAttachment links a file the test wrote to a chat.db message row, as
// Messages does once it downloaded the attachment.
func addAttachment(t *testing.T, db *sql.Tx, message int64, guid, path, mimeType, name string, size int) {
	t.Helper()
	res, err := db.Exec(`INSERT INTO attachment (guid, filename, mime_type, transfer_name, total_bytes, transfer_state) VALUES (?, ?, ?, ?, ?, 5)`, guid, path, mimeType, name, size)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if _, err := db.Exec(`INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (?, ?)`, message, id); err != nil {
		t.Fatal(err)
	}
}

// TestIMessageInboundMedia: a chat.db message with an image and a
// document attached (rows and files written by the test) reaches the
// webhook with both files, served by their signed links and GET /media/{id};
// a file Messages has not downloaded yet is waited for.
func TestIMessageInboundMedia(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	hooks := newWebhookSink(t, srv)
	config := filepath.Join(t.TempDir(), "agent.json")
	srv.pair(agentBin, config, "mac-media")
	fake := fakeOsascript(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "chat.db")
	db := chatDB(t, dbPath)
	ag := startAgent(t, agentBin, fake, "--config", config, "--transport", "imessage", "--chat-db", dbPath,
		"--poll", "50ms", "--reconnect-max", "500ms", "--log-format", "json")
	until(t, "the agent set its mark", func() bool {
		return strings.Contains(ag.stderr.String(), "received messages are forwarded from here on")
	})

	// The image is downloaded; the document not yet when its row appears.
	imgPath, docPath := filepath.Join(dir, "IMG_0001.png"), filepath.Join(dir, "Quote.pdf")
	if err := os.WriteFile(imgPath, pngFile, 0o600); err != nil {
		t.Fatal(err)
	}
	// Messages puts U+FFFC where each attachment sits in the text, and
	// writes the message with its attachment rows in one transaction.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	res, err := tx.Exec(`INSERT INTO message (guid, text, handle_id, service, account, date, cache_has_attachments) VALUES ('p:0/MEDIA-1', ?, 1, 'iMessage', 'e:me@icloud.com', ?, 1)`,
		"\uFFFC\uFFFCthe quote and a photo", appleNow())
	if err != nil {
		t.Fatal(err)
	}
	row, _ := res.LastInsertId()
	if _, err := tx.Exec(`INSERT INTO chat_message_join (chat_id, message_id, message_date) VALUES (1, ?, 0)`, row); err != nil {
		t.Fatal(err)
	}
	addAttachment(t, tx, row, "AT-1", imgPath, "image/png", "IMG_0001.png", len(pngFile))
	addAttachment(t, tx, row, "AT-2", docPath, "application/pdf", "Quote.pdf", len(pdfFile))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The agent waits for the missing file rather than dropping it.
	until(t, "the agent waits for the document", func() bool {
		return strings.Contains(ag.stderr.String(), "waiting for Messages to download an attachment")
	})
	if _, ok := hooks.mediaOf("the quote and a photo"); ok {
		t.Fatal("the message was forwarded before its document was downloaded")
	}
	if err := os.WriteFile(docPath, pdfFile, 0o600); err != nil {
		t.Fatal(err)
	}

	var files []hookMedia
	until(t, "the webhook gets the message with its files", func() bool {
		var ok bool
		files, ok = hooks.mediaOf("the quote and a photo")
		return ok
	})
	if len(files) != 2 || files[0].Filename != "IMG_0001.png" || files[1].Filename != "Quote.pdf" {
		t.Fatalf("webhook media: got %+v", files)
	}
	checkServed(t, srv, files[0], pngFile, "image/png", "inline")
	checkServed(t, srv, files[1], pdfFile, "application/pdf", "attachment; filename=Quote.pdf")
}

// TestWhatsAppInboundMediaWaitsWhileDisabled: a file received while an
// admin has the device disabled is refused by the server (403
// device_disabled) and kept, to be uploaded once the device is enabled
// again, rather than dropped from its message.
func TestWhatsAppInboundMediaWaitsWhileDisabled(t *testing.T) {
	t.Parallel()
	agentBin, serverBin := binaries(t)
	srv := newServer(t, serverBin)
	config := filepath.Join(t.TempDir(), "agent.json")
	srv.pair(agentBin, config, "wa-off")
	cfg, err := agent.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	j, err := agent.OpenJournal(agent.JournalPath(config), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const own = "+15550100001"
	fake := wafake.New(own)
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	tr := whatsapp.New(whatsapp.Config{Client: fake, MaxInboundMedia: 64 << 10, Logger: log})
	a := agent.New(agent.Options{Config: cfg, Transport: tr, Journal: j, HTTPClient: testhttp.Client, Logger: log, InboundMediaBytes: 64 << 10,
		BackoffMax: 500 * time.Millisecond, DeliveryPoll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	}()
	until(t, "the number is listed online", func() bool { return srv.agentID("whatsapp", own) != "" })
	srv.must("PATCH", "/device/wa-off", map[string]any{"status": "disabled"}, http.StatusOK)

	customer := types.NewJID("15557654321", types.DefaultUserServer)
	fake.AddMedia("/img/1", pngFile)
	fake.Emit(&events.Message{Info: types.MessageInfo{MessageSource: types.MessageSource{Chat: customer, Sender: customer},
		ID: "3EB0OFF1", Timestamp: time.Now()}, Message: &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: gproto.String("while off"),
		Mimetype: gproto.String("image/png"), DirectPath: gproto.String("/img/1"), FileLength: gproto.Uint64(uint64(len(pngFile)))}}})
	until(t, "the upload is refused for now", func() bool {
		return strings.Contains(logs.String(), "device_disabled")
	})
	if strings.Contains(logs.String(), "refused by the server") || !strings.Contains(logs.String(), "received file not uploaded yet; retrying") {
		t.Fatalf("the file of a disabled device was dropped, want it kept for a retry:\n%s", logs.String())
	}
	if left, _ := filepath.Glob(filepath.Join(agent.JournalPath(config)+".media", "*")); len(left) != 1 {
		t.Fatalf("spool holds %d files, want the image kept", len(left))
	}
}
