package store

import (
	"errors"
	"time"
)

// MediaChunkSize is the size of one stored chunk of a file.
const MediaChunkSize = 256 << 10

// DefaultMediaOrphanAge is how long an upload no message named is kept:
// an agent sends the inbound frame right after the upload, and retries it
// for as long as it is offline, so a day covers a long outage and still
// frees the space of an agent that gave up.
const DefaultMediaOrphanAge = 24 * time.Hour

// ErrMediaUnknown refuses an inbound message naming a media id that is not
// an upload of the same device registration (or another message took it).
var ErrMediaUnknown = errors.New("store: no such media upload of this device")

// Media is one stored file.
type Media struct {
	ID        string `json:"id"`
	CompanyID uint64 `json:"company_id"`
	DeviceID  uint64 `json:"device_id"`
	// Key is the agent's name for the upload (its inbound client_id and
	// the file's place in it): a repeated upload answers the first one.
	Key         string    `json:"key"`
	ContentType string    `json:"content_type"`
	Filename    string    `json:"filename,omitempty"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	MessageID   uint64    `json:"message_id,omitempty"` // 0 until a message takes it
	CreatedAt   time.Time `json:"created_at"`
}

// MediaRef is what a message keeps of each of its files.
type MediaRef struct {
	ID          string `json:"id"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Filename    string `json:"filename,omitempty"`
}

// Ref is the message's view of the file.
func (m Media) Ref() MediaRef {
	return MediaRef{ID: m.ID, ContentType: m.ContentType, Size: m.Size, Filename: m.Filename}
}
