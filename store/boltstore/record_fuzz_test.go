package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// recordSeeds are stored records of every compact type, filled and empty,
// in both encodings: the compact one and the JSON of stores before
// schema 7.
func recordSeeds(f *testing.F) [][]byte {
	var m Message
	filled(f, &m)
	var c Conversation
	filled(f, &c)
	var a Activity
	filled(f, &a)
	var seeds [][]byte
	for _, v := range []any{m, c, a, Message{}, Conversation{}, Activity{}, Message{ID: 1, CreatedAt: time.Unix(0, 0).UTC(), Segments: -1}} {
		raw, err := encodeRecord(v)
		if err != nil {
			f.Fatal(err)
		}
		js, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, raw, js)
	}
	return seeds
}

// FuzzDecodeRecord reads arbitrary bytes as each compact record type, as a
// damaged or foreign file would hand them over: never a panic, never a
// list longer than the record has bytes (a length prefix is checked
// against what is left before anything is made of it), and a record that
// reads encodes again to one that reads the same.
func FuzzDecodeRecord(f *testing.F) {
	for _, raw := range recordSeeds(f) {
		f.Add(raw)
	}
	// A message whose attempts claim 2^62 entries, and one whose first
	// string claims 2^63 bytes.
	huge := binary.AppendUvarint(nil, 1<<62)
	f.Add(append([]byte{tagMessage, 1, 1, 1, 1}, huge...))
	f.Add(append([]byte{tagConversation}, binary.AppendUvarint(nil, 1<<63)...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if id, err := messageCompany(raw); err != nil && id != 0 {
			t.Fatalf("messageCompany(%q) = %d with error %v", raw, id, err)
		}
		var m Message
		if err := decodeRecord(raw, &m); err == nil {
			if n := len(m.Attempts) + len(m.Media) + windowDays(&m); n > len(raw) {
				t.Fatalf("a record of %d bytes read as %d list entries", len(raw), n)
			}
			sameAfterEncoding(t, raw, &m, new(Message))
		}
		var c Conversation
		if err := decodeRecord(raw, &c); err == nil {
			sameAfterEncoding(t, raw, &c, new(Conversation))
		}
		var a Activity
		if err := decodeRecord(raw, &a); err == nil {
			sameAfterEncoding(t, raw, &a, new(Activity))
		}
	})
}

func windowDays(m *Message) int {
	if m.Window == nil {
		return 0
	}
	return len(m.Window.Days)
}

// sameAfterEncoding encodes what raw read as (in) and reads it into out:
// the same value must come back.
func sameAfterEncoding(t *testing.T, raw []byte, in, out any) {
	t.Helper()
	again, err := encodeRecord(in)
	if err != nil {
		t.Fatalf("%q read as %+v that does not encode: %v", raw, in, err)
	}
	if err := decodeRecord(again, out); err != nil {
		t.Fatalf("%q read as %+v, encoded %q, reads no more: %v", raw, in, again, err)
	}
	if !reflect.DeepEqual(normalised(out), normalised(in)) {
		t.Fatalf("%q read as %+v, encoded %q, reads as %+v", raw, in, again, out)
	}
}

// normalised is a copy of the record v points to as the compact encoding
// keeps it: a record read from JSON holds times in the zone they were
// written with and "[]" as an empty list, and the compact encoding keeps
// the instant (in UTC) and no list.
func normalised(v any) any {
	c := reflect.New(reflect.TypeOf(v).Elem()).Elem()
	c.Set(reflect.ValueOf(v).Elem())
	normalise(c)
	return c.Interface()
}

func normalise(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			v.Set(reflect.ValueOf(t.UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				normalise(v.Field(i))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			c := reflect.New(v.Type().Elem())
			c.Elem().Set(v.Elem())
			normalise(c.Elem())
			v.Set(c)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			normalise(c.Index(i))
		}
		v.Set(c)
	}
}

// FuzzRecordRoundTrip builds a message, a conversation and an activity
// event from fuzzed bytes, every field of its own (reflection, as
// filled does, so a field added later is fuzzed too), and wants each to
// read back exactly as it was written.
func FuzzRecordRoundTrip(f *testing.F) {
	for _, raw := range recordSeeds(f) {
		f.Add(raw)
	}
	f.Add([]byte{})
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00\x00\x00\x80\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &feeder{data: data}
		for _, v := range []any{new(Message), new(Conversation), new(Activity)} {
			src.fill(reflect.ValueOf(v).Elem())
			raw, err := encodeRecord(v)
			if err != nil {
				t.Fatal(err)
			}
			out := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := decodeRecord(raw, out); err != nil {
				t.Fatalf("%+v encoded as %q does not read: %v", v, raw, err)
			}
			if !reflect.DeepEqual(out, v) {
				t.Fatalf("%+v encoded as %q reads as %+v", v, raw, out)
			}
		}
	})
}

// feeder hands out field values taken from fuzzed bytes; past their end,
// every value is zero.
type feeder struct {
	data []byte
}

func (s *feeder) take(n int) []byte {
	n = min(n, len(s.data))
	b := s.data[:n]
	s.data = s.data[n:]
	return b
}

func (s *feeder) uint64() uint64 {
	var b [8]byte
	copy(b[:], s.take(8))
	return binary.LittleEndian.Uint64(b[:])
}

// length is a list's or a string's length: a byte, so that short inputs
// still reach the fields after it.
func (s *feeder) length() int {
	b := s.take(1)
	if len(b) == 0 {
		return 0
	}
	return int(b[0])
}

func (s *feeder) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			// Any instant a time.Time holds, in UTC as records keep it.
			sec, nsec := int64(s.uint64()), int64(s.uint64()%1e9)
			v.Set(reflect.ValueOf(time.Unix(sec, nsec).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).Tag.Get("json") == "-" {
				continue // not stored
			}
			s.fill(v.Field(i))
		}
	case reflect.String:
		v.SetString(string(s.take(s.length())))
	case reflect.Uint64:
		v.SetUint(s.uint64())
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(s.uint64()))
	case reflect.Pointer:
		if s.length()%2 == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		s.fill(v.Elem())
	case reflect.Slice:
		n := s.length() % 4
		if n == 0 {
			v.SetZero() // an empty list reads back as none
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			s.fill(v.Index(i))
		}
	default:
		panic("record_fuzz_test: teach the feeder about " + v.Type().String())
	}
}
