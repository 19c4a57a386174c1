package whatsapp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.mau.fi/whatsmeow/proto/waE2E"
	gproto "google.golang.org/protobuf/proto"
)

// These tests run the real whatsmeow client of a new session against a
// loopback HTTP server standing for the host a received message names.

func newSessionClient(t *testing.T) (Client, func(ctx context.Context, msg *waE2E.ImageMessage) ([]byte, error)) {
	t.Helper()
	s, err := OpenSession(context.Background(), filepath.Join(t.TempDir(), "wa.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cl, raw, err := s.NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cl, func(ctx context.Context, msg *waE2E.ImageMessage) ([]byte, error) { return raw.Download(ctx, msg) }
}

// A received media message's URL is the sender's word: the agent never
// fetches it (it could name a host on the agent's own network), only the
// file's direct path on WhatsApp's media hosts.
func TestDownloadIgnoresTheMessagesURL(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	cl, _ := newSessionClient(t)
	msg := &waE2E.ImageMessage{URL: gproto.String(srv.URL + "/router/admin"), Mimetype: gproto.String("image/jpeg"),
		MediaKey: make([]byte, 32), FileEncSHA256: make([]byte, 32), FileSHA256: make([]byte, 32), FileLength: gproto.Uint64(100)}
	if _, err := cl.Download(context.Background(), msg); err == nil {
		t.Fatal("a message without a direct path was downloaded")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the message's URL was fetched %d times", n)
	}
	if msg.GetURL() == "" {
		t.Fatal("the caller's message was changed")
	}
}

// A media download stops at its limit, whatever the message announced:
// whatsmeow reads a whole file into memory.
func TestMediaDownloadIsCutAtItsLimit(t *testing.T) {
	for _, withLength := range []bool{false, true} {
		var wrote atomic.Int64
		const total = 64 << 20
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if withLength {
				w.Header().Set("Content-Length", "67108864")
			}
			chunk := []byte(strings.Repeat("x", 64<<10))
			for wrote.Load() < total {
				n, err := w.Write(chunk)
				wrote.Add(int64(n))
				if err != nil {
					return
				}
			}
		}))
		_, download := newSessionClient(t)
		msg := &waE2E.ImageMessage{URL: gproto.String(srv.URL + "/big"), Mimetype: gproto.String("image/jpeg"),
			MediaKey: make([]byte, 32), FileEncSHA256: make([]byte, 32), FileSHA256: make([]byte, 32), FileLength: gproto.Uint64(100)}
		_, err := download(withMediaLimit(context.Background(), 1<<20), msg)
		srv.Close()
		if !errors.Is(err, errMediaTooBig) {
			t.Fatalf("Content-Length sent %v: got %v, want errMediaTooBig", withLength, err)
		}
	}
}

// A message WhatsApp delivers again (not acknowledged: the agent stopped,
// or its journal failed, before the message was journaled) can be read
// again only from whatsmeow's buffer of decrypted messages: the first
// decryption used up the message's key. The session's client keeps the
// buffer, and the session file holds it.
func TestSessionBuffersDecryptedMessages(t *testing.T) {
	s, err := OpenSession(context.Background(), filepath.Join(t.TempDir(), "wa.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, raw, err := s.NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !raw.SynchronousAck || !raw.EnableDecryptedEventBuffer {
		t.Fatalf("SynchronousAck %v, EnableDecryptedEventBuffer %v; want both", raw.SynchronousAck, raw.EnableDecryptedEventBuffer)
	}
	var n int
	if err := s.db.QueryRowContext(context.Background(), `SELECT count(*) FROM whatsmeow_event_buffer`).Scan(&n); err != nil {
		t.Fatalf("the session file holds no buffer of decrypted messages: %v", err)
	}
}
