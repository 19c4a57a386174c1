package store

import (
	"errors"
	"io"
	"time"
)

// MediaChunkSize is the size of one stored chunk of a file: every chunk
// of a file but its last holds this many bytes, so a byte's place names
// its chunk.
const MediaChunkSize = 256 << 10

// CopyMediaChunks writes n bytes of a file from byte off (n < 0: to its
// end) to w, reading the chunks it needs in order with chunk, which
// answers false past the file's last. It is the loop of both backends'
// CopyMedia; each reads a chunk its own way (one short read each, so a
// slow reader never holds the store).
func CopyMediaChunks(w io.Writer, off, n int64, chunk func(i uint32) ([]byte, bool, error)) (int64, error) {
	var total int64
	skip := off % MediaChunkSize
	for i := uint32(off / MediaChunkSize); n < 0 || total < n; i++ {
		data, ok, err := chunk(i)
		if err != nil || !ok {
			return total, err
		}
		data = data[min(skip, int64(len(data))):]
		skip = 0
		if n >= 0 && int64(len(data)) > n-total {
			data = data[:n-total]
		}
		k, err := w.Write(data)
		total += int64(k)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// DefaultMediaOrphanAge is how long an upload no message named is kept:
// an agent sends the inbound frame right after the upload, and retries it
// for as long as it is offline, so a day covers a long outage and still
// frees the space of an agent that gave up.
const DefaultMediaOrphanAge = 24 * time.Hour

// MediaRecordCost is what a stored file's record, its key and index entries
// count against the daily storage budget, on top of the file's bytes.
const MediaRecordCost = 512

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
