// Package wafake is a fake WhatsApp client for tests: it implements
// whatsapp.Client, records what the transport sends and lets a test play
// whatsmeow's own events into it. It reaches no WhatsApp server.
package wafake

import (
	"context"
	"fmt"
	"sync"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
)

// Fake is a whatsapp.Client that reaches nothing.
type Fake struct {
	mu       sync.Mutex
	own      types.JID
	loggedIn bool
	handlers []func(any) bool
	// NotOnWhatsApp lists numbers IsOnWhatsApp answers as without an account.
	NotOnWhatsApp map[string]bool
	// SendErr, when set, is SendMessage's answer (the message still
	// recorded as sent: an error after the message left, such as
	// whatsmeow's timeout waiting for WhatsApp's answer).
	SendErr   error
	sent      []FakeSent
	uploads   [][]byte
	n         int
	media     map[string][]byte // direct path -> the decrypted file
	downloads int
}

// FakeSent is one message given to the fake's SendMessage.
type FakeSent struct {
	ID  types.MessageID
	To  types.JID
	Msg *waE2E.Message
}

// NewFake returns a fake client linked to the account of number (E.164).
func New(number string) *Fake {
	return &Fake{own: types.NewJID(number[1:], types.DefaultUserServer), loggedIn: true, NotOnWhatsApp: map[string]bool{}}
}

func (f *Fake) Connect() error { return nil }
func (f *Fake) Disconnect()    {}
func (f *Fake) IsLoggedIn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loggedIn
}
func (f *Fake) Own() types.JID { return f.own }
func (f *Fake) AddEventHandler(h func(any) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = append(f.handlers, h)
}
func (f *Fake) IsOnWhatsApp(ctx context.Context, phones []string) ([]types.IsOnWhatsAppResponse, error) {
	var out []types.IsOnWhatsAppResponse
	for _, p := range phones {
		out = append(out, types.IsOnWhatsAppResponse{Query: p, JID: types.NewJID(p[1:], types.DefaultUserServer), IsIn: !f.NotOnWhatsApp[p]})
	}
	return out, nil
}
func (f *Fake) Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uploads = append(f.uploads, data)
	return whatsmeow.UploadResponse{URL: "https://mmg.example/u", DirectPath: "/u", MediaKey: []byte("k"), FileSHA256: []byte("s"), FileEncSHA256: []byte("e")}, nil
}
func (f *Fake) SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message) (types.MessageID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := types.MessageID(fmt.Sprintf("3EB0FAKE%04d", f.n))
	f.sent = append(f.sent, FakeSent{ID: id, To: to, Msg: msg})
	if f.SendErr != nil {
		return "", f.SendErr
	}
	return id, nil
}

// AddMedia makes Download answer data for a message whose media has this
// direct path (as WhatsApp's servers would, decrypted).
func (f *Fake) AddMedia(directPath string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.media == nil {
		f.media = map[string][]byte{}
	}
	f.media[directPath] = data
}

// Download answers the media AddMedia set for the message's direct path.
func (f *Fake) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.downloads++
	data, ok := f.media[msg.GetDirectPath()]
	if !ok {
		return nil, whatsmeow.ErrMediaDownloadFailedWith404
	}
	return data, nil
}

// Downloads is how many times Download was called.
func (f *Fake) Downloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.downloads
}

// Sent is what SendMessage was given so far.
func (f *Fake) Sent() []FakeSent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeSent(nil), f.sent...)
}

// Uploads is what Upload was given so far.
func (f *Fake) Uploads() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.uploads...)
}

// Emit plays one of whatsmeow's events to the handlers, as whatsmeow does
// (synchronously), and says whether whatsmeow would acknowledge it: every
// handler handled it (as whatsmeow's dispatch, it stops at the first that
// did not). A LoggedOut event also unlinks the fake.
func (f *Fake) Emit(evt any) (acked bool) {
	f.mu.Lock()
	hs := make([]func(any) bool, len(f.handlers))
	copy(hs, f.handlers)
	if _, ok := evt.(*events.LoggedOut); ok {
		f.loggedIn = false
	}
	f.mu.Unlock()
	for _, h := range hs {
		if !h(evt) {
			return false
		}
	}
	return true
}
