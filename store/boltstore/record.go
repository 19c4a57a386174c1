package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/window"
)

// Messages and conversations, the records every send writes and every
// report rewrites, and the activity events of reports, are kept in a
// compact binary encoding; every other record is JSON. getJSON, putJSON and jsonUnmarshal choose by the type,
// so no caller has to. A compact record starts with its tag byte; a JSON
// JSON one with '{' (or '[' or another JSON value), so records written before schema 7 (all JSON) are read as
// they are and become compact when next written.
//
// The layout: the tag, then each field in the order of appendRecord, an
// integer as a varint, a string as its length (uvarint) and bytes, a time
// as uvarint(nanoseconds+1) and varint(seconds) since 1970, or a single
// 0 for the zero time. Times come back in UTC. Message's HandedTo, last, is
// written only when set, under its own tag (tagMessageHanded): every other
// message keeps the layout it had before. A field added to Message or
// Conversation is appended at the end, with a new tag if older records
// must still be read without it (TestRecordRoundTrip fails for a field
// left out).
const (
	tagMessage      = 0x01
	tagConversation = 0x02
	tagActivity     = 0x03
	// tagMessageHanded is a message with HandedTo set: tagMessage's
	// fields, then HandedTo.
	tagMessageHanded = 0x04
)

var errBadRecord = errors.New("malformed compact record")

// encodeRecord is the stored form of v.
func encodeRecord(v any) ([]byte, error) {
	switch r := v.(type) {
	case Message:
		return appendMessageRecord(&r), nil
	case *Message:
		return appendMessageRecord(r), nil
	case Conversation:
		return appendConversationRecord(&r), nil
	case *Conversation:
		return appendConversationRecord(r), nil
	case Activity:
		return appendActivityRecord(&r), nil
	case *Activity:
		return appendActivityRecord(r), nil
	}
	return json.Marshal(v)
}

// decodeRecord reads a stored record into v: a compact one into the type
// it was written from, JSON into anything.
func decodeRecord(raw []byte, v any) error {
	if len(raw) == 0 || (raw[0] != tagMessage && raw[0] != tagMessageHanded && raw[0] != tagConversation && raw[0] != tagActivity) {
		// JSON: an object, or an array or any other value a record of
		// another type holds. No JSON text starts with a tag byte.
		return json.Unmarshal(raw, v)
	}
	switch r := v.(type) {
	case *Message:
		return readMessageRecord(r, raw)
	case *Conversation:
		return readConversationRecord(r, raw)
	case *Activity:
		return readActivityRecord(r, raw)
	}
	return fmt.Errorf("store: a compact record (tag %#x) read as %T", raw[0], v)
}

// messageCompany is the company id of a stored message record, read
// without decoding the rest.
func messageCompany(raw []byte) (uint64, error) {
	if len(raw) > 0 && (raw[0] == tagMessage || raw[0] == tagMessageHanded) {
		r := recordReader{raw: raw, off: 1}
		r.uint() // the id
		id := r.uint()
		return id, r.err
	}
	var owner struct {
		CompanyID uint64 `json:"company_id"`
	}
	err := json.Unmarshal(raw, &owner)
	return owner.CompanyID, err
}

func appendMessageRecord(m *Message) []byte {
	strs := len(m.UUID) + len(m.Device) + len(m.Direction) + len(m.Channel) + len(m.Phone) + len(m.Text) +
		len(m.SIMSlot) + len(m.Status) + len(m.Error) + len(m.ClientID) + len(m.ReceivedAt) + len(m.StatusAt) +
		len(m.Detail) + len(m.NumberRef) + len(m.Account) + len(m.ContentType) + len(m.MediaURL)
	b := make([]byte, 0, 1+strs+17*2+8*10+4*15) // tag, strings (each under 16 KB) with their lengths, integers, times
	b = append(b, tagMessage)
	b = binary.AppendUvarint(b, m.ID)
	b = binary.AppendUvarint(b, m.CompanyID)
	b = binary.AppendUvarint(b, m.UserID)
	b = binary.AppendUvarint(b, m.DeviceID)
	b = appendString(b, m.UUID)
	b = appendString(b, m.Device)
	b = appendString(b, m.Direction)
	b = appendString(b, m.Channel)
	b = appendString(b, m.Phone)
	b = appendString(b, m.Text)
	b = appendString(b, m.SIMSlot)
	b = appendString(b, m.Status)
	b = appendString(b, m.Error)
	b = binary.AppendVarint(b, int64(m.Segments))
	b = appendString(b, m.ClientID)
	b = appendString(b, m.ReceivedAt)
	b = appendTime(b, m.CreatedAt)
	b = appendTime(b, m.UpdatedAt)
	b = appendTime(b, m.ExpiresAt)
	b = appendTime(b, m.SendAt)
	b = binary.AppendUvarint(b, m.QueueSeq)
	b = appendString(b, m.StatusAt)
	b = appendString(b, m.Detail)
	b = binary.AppendUvarint(b, m.NumberID)
	b = appendString(b, m.NumberRef)
	b = appendString(b, m.Account)
	b = appendString(b, m.ContentType)
	b = appendString(b, m.MediaURL)
	b = appendString(b, m.Pool)
	b = binary.AppendUvarint(b, m.PoolID)
	b = binary.AppendUvarint(b, uint64(len(m.Attempts)))
	for _, a := range m.Attempts {
		b = appendString(b, a.Device)
		b = appendString(b, a.SIMSlot)
		b = appendString(b, a.Reason)
		b = appendTime(b, a.MovedAt)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Media)))
	for _, f := range m.Media {
		b = appendString(b, f.ID)
		b = appendString(b, f.ContentType)
		b = binary.AppendVarint(b, f.Size)
		b = appendString(b, f.Filename)
	}
	if w := m.Window; w == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(w.Days))+1)
		for _, d := range w.Days {
			b = appendString(b, d)
		}
		b = appendString(b, w.From)
		b = appendString(b, w.To)
		b = appendString(b, w.TimeZone)
	}
	b = appendTime(b, m.HeldUntil)
	b = binary.AppendVarint(b, int64(m.Priority))
	if m.HandedTo != 0 {
		b[0] = tagMessageHanded
		b = binary.AppendUvarint(b, m.HandedTo)
	}
	return b
}

func readMessageRecord(m *Message, raw []byte) error {
	if raw[0] != tagMessage && raw[0] != tagMessageHanded {
		return fmt.Errorf("store: a record with tag %#x read as a message", raw[0])
	}
	r := recordReader{raw: raw, str: string(raw), off: 1}
	*m = Message{
		ID: r.uint(), CompanyID: r.uint(), UserID: r.uint(), DeviceID: r.uint(),
		UUID: r.string(), Device: r.string(), Direction: r.string(), Channel: r.string(), Phone: r.string(),
		Text: r.string(), SIMSlot: r.string(), Status: r.string(), Error: r.string(),
		Segments: int(r.int()), ClientID: r.string(), ReceivedAt: r.string(),
		CreatedAt: r.time(), UpdatedAt: r.time(), ExpiresAt: r.time(), SendAt: r.time(),
		QueueSeq: r.uint(), StatusAt: r.string(), Detail: r.string(),
		NumberID: r.uint(), NumberRef: r.string(), Account: r.string(), ContentType: r.string(), MediaURL: r.string(),
		Pool: r.string(), PoolID: r.uint(),
	}
	m.Attempts = readList(&r, func() Attempt {
		return Attempt{Device: r.string(), SIMSlot: r.string(), Reason: r.string(), MovedAt: r.time()}
	})
	m.Media = readList(&r, func() MediaRef {
		return MediaRef{ID: r.string(), ContentType: r.string(), Size: r.int(), Filename: r.string()}
	})
	if n := r.count(); n > 0 { // the window: its days + 1, 0 for none
		w := &window.Window{}
		if n > 1 {
			w.Days = make([]string, n-1)
			for i := range w.Days {
				w.Days[i] = r.string()
			}
		}
		w.From, w.To, w.TimeZone = r.string(), r.string(), r.string()
		m.Window = w
	}
	m.HeldUntil = r.time()
	m.Priority = int(r.int())
	if raw[0] == tagMessageHanded {
		m.HandedTo = r.uint()
	}
	return r.done()
}

func appendConversationRecord(c *Conversation) []byte {
	b := make([]byte, 0, 1+len(c.Phone)+len(c.LastMessage)+len(c.Direction)+3*10+15+2*10)
	b = append(b, tagConversation)
	b = appendString(b, c.Phone)
	b = appendString(b, c.LastMessage)
	b = appendTime(b, c.LastMessageAt)
	b = appendString(b, c.Direction)
	b = binary.AppendVarint(b, int64(c.MessageCount))
	b = binary.AppendUvarint(b, c.LastID)
	return b
}

func readConversationRecord(c *Conversation, raw []byte) error {
	if raw[0] != tagConversation {
		return fmt.Errorf("store: a record with tag %#x read as a conversation", raw[0])
	}
	r := recordReader{raw: raw, str: string(raw), off: 1}
	*c = Conversation{Phone: r.string(), LastMessage: r.string(), LastMessageAt: r.time(), Direction: r.string(),
		MessageCount: int(r.int()), LastID: r.uint()}
	return r.done()
}

func appendActivityRecord(a *Activity) []byte {
	b := make([]byte, 0, 1+len(a.Type)+len(a.Description)+2*10+15)
	b = append(b, tagActivity)
	b = appendString(b, a.Type)
	b = appendTime(b, a.At)
	return appendString(b, a.Description)
}

func readActivityRecord(a *Activity, raw []byte) error {
	if raw[0] != tagActivity {
		return fmt.Errorf("store: a record with tag %#x read as an activity event", raw[0])
	}
	r := recordReader{raw: raw, str: string(raw), off: 1}
	*a = Activity{Type: r.string(), At: r.time(), Description: r.string()}
	return r.done()
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(t.Nanosecond())+1)
	return binary.AppendVarint(b, t.Unix())
}

// recordReader reads a compact record's fields in order; the first fault
// sticks and the fields after it read as zero. Its strings share one copy
// of the record (str), made once, instead of one allocation each.
type recordReader struct {
	raw []byte
	str string
	off int
	err error
}

func (r *recordReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.raw[r.off:])
	if n <= 0 {
		r.err = errBadRecord
		return 0
	}
	r.off += n
	return v
}

func (r *recordReader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.raw[r.off:])
	if n <= 0 {
		r.err = errBadRecord
		return 0
	}
	r.off += n
	return v
}

func (r *recordReader) string() string {
	n := r.uint()
	if r.err != nil || n == 0 {
		return ""
	}
	if n > uint64(len(r.raw)-r.off) {
		r.err = errBadRecord
		return ""
	}
	s := r.str[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *recordReader) time() time.Time {
	ns := r.uint()
	if r.err != nil || ns == 0 {
		return time.Time{}
	}
	sec := r.int()
	if ns > 1e9 {
		r.err = errBadRecord
	}
	if r.err != nil {
		return time.Time{}
	}
	return time.Unix(sec, int64(ns-1)).UTC()
}

// count reads a list's length. Each element takes a byte at least, so a
// length beyond the bytes left is a malformed record, never an allocation.
func (r *recordReader) count() int {
	n := r.uint()
	if r.err == nil && n > uint64(len(r.raw)-r.off) {
		r.err = errBadRecord
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// readList reads a list written as its length and then each element, nil
// when empty.
func readList[T any](r *recordReader, read func() T) []T {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = read()
	}
	return out
}

// done is the reader's fault, if any, or one for bytes left unread.
func (r *recordReader) done() error {
	if r.err == nil && r.off != len(r.raw) {
		r.err = errBadRecord
	}
	if r.err != nil {
		return fmt.Errorf("store: %w", r.err)
	}
	return nil
}
