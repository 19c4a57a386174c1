package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// FuzzWithoutNUL reads a phone's frame as withoutNUL rewrites it: the
// rewrite is valid JSON exactly when the frame is, and reads as the frame
// does, token by token, with each U+0000 of a string or a key read as
// U+FFFD and nothing else changed (an escaped backslash before "u0000"
// included). The seeds are the protocol's golden frames and the escapes
// around a NUL.
func FuzzWithoutNUL(f *testing.F) {
	files, err := filepath.Glob("../android-protocol/testdata/*.json")
	if err != nil || len(files) == 0 {
		f.Fatalf("no golden frames: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(bytes.TrimSpace(raw))
	}
	for _, s := range []string{
		`{"type":"inbound","client_id":"c2","channel":"sms","from":"+15551234567","message":"mail me at ann\u0000example.com"}`,
		`{"message":"literal \\u0000"}`, `{"message":"\\\u0000"}`, `{"a\u0000":1,"a\ufffd":2}`, `["\u0000\u0000"]`,
		`{"message":"\u00000"}`, `"\u000`, `\u0000`, `"\`, `{"x":"\u0000"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		out := withoutNUL(data)
		if !bytes.Equal(data, in) {
			t.Fatalf("withoutNUL(%q) changed its input to %q", in, data)
		}
		if valid := json.Valid(data); json.Valid(out) != valid {
			t.Fatalf("withoutNUL(%q) = %q: valid JSON %v before, %v after", data, out, valid, !valid)
		}
		if !json.Valid(data) {
			return
		}
		want, got := tokens(t, data), tokens(t, out)
		for i, tok := range want {
			if s, ok := tok.(string); ok {
				want[i] = strings.ReplaceAll(s, "\x00", "\uFFFD")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("withoutNUL(%q) = %q reads as %q, want %q", data, out, got, want)
		}
	})
}

// tokens is the valid JSON text data as its tokens, numbers as written.
func tokens(t *testing.T, data []byte) []json.Token {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []json.Token
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		out = append(out, tok)
	}
}

// FuzzFrameProblem reads what the server answers a frame it cannot decode
// with: the sentence of frameProblem and the echo of an unknown type stay
// short whatever the frame held (a 64 KiB number is never repeated), and
// the sentence is ASCII, so the close reason it becomes (cut at 120
// bytes) is UTF-8 wherever it is cut.
func FuzzFrameProblem(f *testing.F) {
	for _, s := range []string{`{"type":"ack","id":5}`, `{"type":"hello","protocol":"1"}`, `{"type":"hello","protocol":1e400}`,
		`{"type":"inbound_ack","id":-1}`, `{"type":"hello","sims":[{"slot":7}]}`, `{"type":"health","battery":true}`,
		`{"type":"teleport€€€"}`, `{"type":5}`, `nope`, `{"type":"status","at":{}}`, `{"type":"hello","health":{"sims":"x"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = withoutNUL(data)
		_, err := proto.Decode(data)
		switch {
		case err == nil:
			return
		case errors.Is(err, proto.ErrUnknownType):
			if typ := echo(frameType(data)); len(typ) > proto.MaxEchoBytes || !utf8.ValidString(typ) {
				t.Fatalf("%q: the unknown type is echoed as %q", data, typ)
			}
			return
		}
		msg := frameProblem(err)
		if len(msg) > 200 {
			t.Fatalf("%q: a problem of %d bytes: %q", data, len(msg), msg)
		}
		for i := range len(msg) {
			if msg[i] >= utf8.RuneSelf {
				t.Fatalf("%q: the problem %q is not ASCII", data, msg)
			}
		}
	})
}
