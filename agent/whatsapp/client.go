package whatsapp

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"

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
	// (*events.Message, *events.Receipt, *events.LoggedOut, ...).
	AddEventHandler(handler func(evt any))
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
func (r adapter) AddEventHandler(h func(any)) { r.c.AddEventHandler(func(evt any) { h(evt) }) }
func (r adapter) IsOnWhatsApp(ctx context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error) {
	return r.c.IsOnWhatsApp(ctx, phones)
}
func (r adapter) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	return r.c.Download(ctx, msg)
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
	// whatsmeow reconnects by itself after a drop (events.Disconnected).
	c.EnableAutoReconnect = true
	// A message is acknowledged to WhatsApp only once the handler
	// returned, and the transport's handler returns once the message is
	// in the agent's journal: a crash in between gets it again.
	c.SynchronousAck = true
	return adapter{c}, c, nil
}
