package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	gproto "google.golang.org/protobuf/proto"

	// The pure-Go SQLite driver, registered as "sqlite": the agent is
	// cross-compiled without cgo.
	_ "modernc.org/sqlite"
)

// Client is the part of a WhatsApp session the transport uses. The real
// one is a *whatsmeow.Client (NewClient); tests use a fake, so that nothing
// in them reaches WhatsApp.
type Client interface {
	// Connect opens the session's connection (whatsmeow then reconnects by
	// itself after a drop).
	Connect() error
	Disconnect()
	// IsLoggedIn is whether the session is linked and not logged out.
	IsLoggedIn() bool
	// Own is the linked account's JID (empty when not linked).
	Own() types.JID
	// AddEventHandler registers the handler of whatsmeow's events
	// (*events.Message, *events.Receipt, *events.LoggedOut, ...). The
	// handler says whether it handled the event: a message it did not is
	// not acknowledged to WhatsApp, which sends it again.
	AddEventHandler(handler func(evt any) bool)
	// IsOnWhatsApp tells which E.164 numbers have an account.
	IsOnWhatsApp(ctx context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error)
	// Download fetches and decrypts the media of a received message.
	Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error)
	// Upload encrypts and uploads a media file.
	Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
	// SendMessage sends msg to to and returns the message id WhatsApp's
	// receipts will name.
	SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message) (types.MessageID, error)
}

// adapter adapts *whatsmeow.Client to Client.
type adapter struct{ c *whatsmeow.Client }

func (r adapter) Connect() error   { return r.c.Connect() }
func (r adapter) Disconnect()      { r.c.Disconnect() }
func (r adapter) IsLoggedIn() bool { return r.c.Store.ID != nil }
func (r adapter) Own() types.JID {
	if r.c.Store.ID == nil {
		return types.EmptyJID
	}
	return r.c.Store.ID.ToNonAD()
}
func (r adapter) AddEventHandler(h func(any) bool) { r.c.AddEventHandlerWithSuccessStatus(h) }
func (r adapter) IsOnWhatsApp(ctx context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error) {
	return r.c.IsOnWhatsApp(ctx, phones)
}
func (r adapter) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	return r.c.Download(ctx, withoutURL(msg))
}

// withoutURL returns a copy of a received media message without its URL,
// so whatsmeow fetches the file by its direct path from WhatsApp's own
// media hosts. The URL is whatever the sender put in the message, and
// whatsmeow fetches any URL it is given: a host on the agent's own
// network, or one that never stops sending.
func withoutURL(msg whatsmeow.DownloadableMessage) whatsmeow.DownloadableMessage {
	pm, ok := msg.(gproto.Message)
	if !ok {
		return msg
	}
	c := gproto.Clone(pm)
	r := c.ProtoReflect()
	if fd := r.Descriptor().Fields().ByName("URL"); fd != nil {
		r.Clear(fd)
	}
	if d, ok := c.(whatsmeow.DownloadableMessage); ok {
		return d
	}
	return msg
}

// mediaLimitKey is the context key of the most bytes a media download may
// read (withMediaLimit).
type mediaLimitKey struct{}

// errMediaTooBig is a media download cut at its limit.
var errMediaTooBig = errors.New("the media file is bigger than the agent takes")

// withMediaLimit bounds the media downloads made with ctx to n bytes of
// response body: whatsmeow reads a whole file into memory, and the size a
// message announces is the sender's word.
func withMediaLimit(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, mediaLimitKey{}, n)
}

// limitedTransport cuts each response body at the limit its request's
// context carries (withMediaLimit); without one the body is left whole.
type limitedTransport struct{ base http.RoundTripper }

func (l limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if n, ok := req.Context().Value(mediaLimitKey{}).(int64); ok {
		b := &limitedBody{ReadCloser: resp.Body, left: n}
		if resp.ContentLength > n {
			b.left = -1 // said too big: nothing is read
		}
		resp.Body = b
	}
	return resp, nil
}

// limitedBody reads at most left bytes and fails once the body proves
// longer.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errMediaTooBig
	}
	if b.left == 0 {
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			b.left = -1
			return 0, errMediaTooBig
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
func (r adapter) Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	return r.c.Upload(ctx, data, kind)
}
func (r adapter) SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message) (types.MessageID, error) {
	res, err := r.c.SendMessage(ctx, to, msg)
	return res.ID, err
}

// Session is the on-disk WhatsApp session (whatsmeow's device store in a
// SQLite file). It holds the keys of a linked device: whoever has the file
// can read and send as the account, so it is created with mode 0600.
type Session struct {
	db        *sql.DB
	container *sqlstore.Container
}

// OpenSession opens (or creates) the session file at path.
func OpenSession(ctx context.Context, path string) (*Session, error) {
	// Foreign keys are required by whatsmeow's schema; the busy timeout
	// lets whatsmeow's own goroutines share the file.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("whatsapp session: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("whatsapp session: %w", err)
	}
	f.Close()
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("whatsapp session %s: %w", path, err)
	}
	container := sqlstore.NewWithDB(db, "sqlite", nil)
	if err := container.Upgrade(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("whatsapp session %s: %w", path, err)
	}
	if err := chmodPrivate(path); err != nil {
		db.Close()
		return nil, err
	}
	return &Session{db: db, container: container}, nil
}

// Close closes the session file.
func (s *Session) Close() error { return s.db.Close() }

// NewClient returns a whatsmeow client on the session's device (a new,
// unlinked device when the file holds none), and the raw client for
// linking.
func (s *Session) NewClient(ctx context.Context) (Client, *whatsmeow.Client, error) {
	dev, err := s.container.GetFirstDevice(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("whatsapp session: %w", err)
	}
	c := whatsmeow.NewClient(dev, nil)
	// Media downloads are bounded (withMediaLimit); the rest is
	// whatsmeow's own transport.
	c.SetMediaHTTPClient(&http.Client{Transport: limitedTransport{base: http.DefaultTransport.(*http.Transport).Clone()}})
	// whatsmeow reconnects by itself after a drop (events.Disconnected).
	c.EnableAutoReconnect = true
	// A message is acknowledged to WhatsApp only once the handler
	// returned, and the transport's handler returns once the message is
	// in the agent's journal (a message it could not journal is reported
	// failed, and not acknowledged): a crash in between gets it again.
	c.SynchronousAck = true
	// WhatsApp's second delivery of a message can be read only through
	// this buffer: the first decryption moved the Signal session past the
	// message's key, and a message delivered again decrypts no more
	// (whatsmeow drops it as an old counter). whatsmeow keeps each
	// decrypted message in the session file, in the same transaction as
	// the session's keys, until it was handled, and for 14 days as
	// handled (WhatsApp delivers nothing older again).
	c.EnableDecryptedEventBuffer = true
	return adapter{c}, c, nil
}
