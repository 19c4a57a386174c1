package androidproto

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode feeds Decode what a phone, an agent or a server could send:
// it never panics, and a frame it accepts encodes again and decodes to the
// same value, so a frame read is never one the other side did not mean.
// The seeds are the golden frames of testdata/ and the refusals of
// TestDecodeErrors.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(bytes.TrimSpace(raw))
	}
	for _, s := range []string{`{"type":"teleport"}`, `{}`, `[]`, `nope`, `{"type":"ack","id":5}`,
		`{"type":"ack","id":"x","future":true}`, `{"type":"hello","whatsapp":[],"sims":null}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := Decode(data)
		if err != nil {
			if fr != nil {
				t.Fatalf("Decode(%q) = %#v with error %v", data, fr, err)
			}
			return
		}
		if fr == nil {
			t.Fatalf("Decode(%q) = nil, nil", data)
		}
		// Decode returns a pointer; the encoder takes the frame itself, as
		// the server and the phones write it.
		value := reflect.ValueOf(fr).Elem().Interface().(Frame)
		out, err := Encode(value)
		if err != nil {
			t.Fatalf("Decode(%q) = %#v that does not encode: %v", data, value, err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(%q) = %#v, encoded %s, decodes no more: %v", data, value, out, err)
		}
		if again.FrameType() != fr.FrameType() {
			t.Fatalf("Decode(%q) is a %s, encoded %s a %s", data, fr.FrameType(), out, again.FrameType())
		}
		if !reflect.DeepEqual(emptyAsNil(again), emptyAsNil(fr)) {
			t.Fatalf("Decode(%q) = %#v, encoded %s, decodes to %#v", data, fr, out, again)
		}
	})
}

// FuzzDecodeReportsInOnePass holds Decode's one pass over an ack or a
// status to the two passes every other frame takes (decode): the same
// frame, or the same error, for whatever the bytes hold.
func FuzzDecodeReportsInOnePass(f *testing.F) {
	for _, s := range []string{`{"type":"ack","id":"x"}`, `{"type":"status","id":"x","status":"sent","at":""}`,
		`{"type":"status","id":"x","status":"failed","error":"no signal","detail":"read","at":"2026-11-22T10:04:07.500Z"}`,
		`{"type":"ack","id":"x","status":5}`, `{"type":"ack","id":5}`, `{"type":"ack","type":"status","id":"x","status":"sent"}`,
		`{"type":"status","TYPE":"ack","id":"x"}`, `{"type":"ack","ID":"x","id":"y"}`, `{"type":"status","id":null,"status":"sent"}`,
		`{"type":"ack"`, `{"type":"ack"} x`, `{"type":"status","id":"\u0000\ud800"}`, `{"type":"ack","type":5}`, `{"type":"ack","future":{"a":[1]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := Decode(data)
		want, wantErr := decode(data)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("Decode(%q): error %v, want %v", data, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, want %#v", data, got, want)
		}
	})
}

// emptyAsNil is a copy of the frame fr points to with every empty list
// nil: a list field with omitempty is left out when empty, so "[]" comes
// back as no list, which every reader treats alike.
func emptyAsNil(fr Frame) any {
	v := reflect.New(reflect.TypeOf(fr).Elem()).Elem()
	v.Set(reflect.ValueOf(fr).Elem())
	normalise(v)
	return v.Interface()
}

func normalise(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			normalise(v.Field(i))
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
			v.Set(reflect.Zero(v.Type()))
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

// FuzzCutBytes: a cut is never longer than its limit, is a prefix of the
// text, keeps a text that fits whole, never ends inside a character of a
// UTF-8 text, and gives up at most three bytes (a character's tail) to
// avoid that.
func FuzzCutBytes(f *testing.F) {
	euros := "a" + strings.Repeat("€", 100)
	for _, c := range []struct {
		s string
		n int
	}{
		{"short", 200}, {"exactly", 7}, {"abcdef", 3}, {euros, 128}, {euros, 130},
		{strings.Repeat("a", 199) + "é", 200}, {"\x80\x80\x80\x80\x80\x80", 4}, {"😀😀", 1}, {"", 0}, {"é", 0},
	} {
		f.Add(c.s, c.n)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 {
			n = ^n // a limit is a size, a constant of the caller: never negative
		}
		got := CutBytes(s, n)
		switch {
		case len(got) > n:
			t.Fatalf("CutBytes(%q, %d) = %q, longer than %d", s, n, got, n)
		case !strings.HasPrefix(s, got):
			t.Fatalf("CutBytes(%q, %d) = %q, not a prefix", s, n, got)
		case len(s) <= n && got != s:
			t.Fatalf("CutBytes(%q, %d) = %q, cut a text that fits", s, n, got)
		case len(s) > n && len(got) < n-(utf8.UTFMax-1):
			t.Fatalf("CutBytes(%q, %d) = %q, cut more than a character's tail", s, n, got)
		case utf8.ValidString(s) && !utf8.ValidString(got):
			t.Fatalf("CutBytes(%q, %d) = %q splits a character", s, n, got)
		}
	})
}
