package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"testing/iotest"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// TestChatSendAnswer holds the send's answer, written by hand for a send
// without a pool, to what json.Marshal writes for sendJSON: byte for byte,
// for every word and for ids it must escape (which it leaves to Marshal).
func TestChatSendAnswer(t *testing.T) {
	for _, m := range []store.Message{
		{UUID: "0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"},
		{UUID: "0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", Status: store.MsgScheduled},
		{UUID: ""},
		{UUID: `a<b>&"c\d` + "\u2028\x01é"},
		{UUID: "0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", Pool: "sales <eu>", Device: "phone-1", SIMSlot: "SIM2"},
	} {
		status, got := chatSendAnswer(m)
		want, err := json.Marshal(sendJSON{Message: sendWord(m), QueueID: m.UUID, routeJSON: routeOf(m)})
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%+v: got %d %s, want 200 %s", m, status, got, want)
		}
	}
}

// TestDecodeJSONAsDecoder holds decodeJSON's Unmarshal, which it uses for
// a body that json.Valid passes, to the Decoder it uses for the others:
// for such a body, the same value and the same error (type, field and
// offset), and nothing after the value for the Decoder either.
func TestDecodeJSONAsDecoder(t *testing.T) {
	bodies := []string{
		``, ` `, `{}`, " {}\n\t", `null`, `[]`, `"x"`, `1`, ` [1] `,
		`{"device_fingerprint":"p","phone":"+15551234567","message":"hi","sim_slot":"SIM1"}`,
		`{"phone":"a","phone":"b","unknown":[1,{"x":2}]}`,
		`{"priority":"high"}`, ` {"priority":2.5}`, `{"validity":1e30}`, `{"window":{"days":[1]}}`,
		`{"window":{"days":["mon",2]},"message":7}`, `{"message":"\u0000"}`, `{"message":"a\u0000b","phone":"x"}`,
		`{"message":"` + "\xff" + `"}`, `{} {}`, `{}x`, `{}]`, `{"a":`, `{"a":1,}`, `{'a':1}`, `{"a":1}}`, "\ufeff{}",
	}
	valid := 0
	for _, body := range bodies {
		data := []byte(body)
		if !json.Valid(data) {
			continue
		}
		valid++
		var got, want sendBody
		errGot := json.Unmarshal(data, &got)
		dec := json.NewDecoder(bytes.NewReader(data))
		errWant := dec.Decode(&want)
		if !reflect.DeepEqual(errGot, errWant) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: Unmarshal %v %+v, Decoder %v %+v", body, errGot, got, errWant, want)
		}
		if _, extra := dec.Token(); errWant == nil && extra != io.EOF {
			t.Errorf("%q: the Decoder finds more after the value: %v", body, extra)
		}
	}
	if valid < 15 {
		t.Fatalf("%d valid bodies: the list lost its point", valid)
	}
}

// TestRateLimitHeaders holds setRateLimitHeaders to the headers Header.Set
// writes.
func TestRateLimitHeaders(t *testing.T) {
	for _, res := range []pacing.Result{{}, {Limit: 100, Remaining: 99, Reset: 59e9}, {Limit: 1 << 40, Remaining: 0, Reset: 1}} {
		got, want := http.Header{}, http.Header{}
		setRateLimitHeaders(got, res)
		want.Set("RateLimit-Limit", strconv.Itoa(res.Limit))
		want.Set("RateLimit-Remaining", strconv.Itoa(res.Remaining))
		want.Set("RateLimit-Reset", strconv.Itoa(res.ResetSeconds()))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: got %v, want %v", res, got, want)
		}
	}
}

// FuzzUnmarshalChecksFirst holds what decodeJSON leans on to skip a
// json.Valid pass: Unmarshal answers a *json.SyntaxError exactly for what
// json.Valid refuses, and then has not touched the value, so the Decoder
// that words the refusal starts from the same value as before.
func FuzzUnmarshalChecksFirst(f *testing.F) {
	for _, body := range []string{
		``, ` `, `{}`, `null`, `[]`, `1`, `{"device_fingerprint":"p","phone":"+15551234567","message":"hi","sim_slot":"SIM1"}`,
		`{"priority":"high"}`, `{"validity":1e30}`, `{"window":{"days":["mon",2]},"message":7}`, `{"message":"` + "\xff" + `"}`,
		`{} {}`, `{}x`, `{}]`, `{"a":`, `{"a":1,}`, `{'a':1}`, `{"a":1}}`, "\ufeff{}", `{"message":"x","phone":"+1"} [`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := sendBody{Phone: "before", Message: "before"}
		err := json.Unmarshal(data, &v)
		_, syntax := err.(*json.SyntaxError)
		if syntax == json.Valid(data) {
			t.Fatalf("%q: json.Valid %v, Unmarshal %T %v", data, json.Valid(data), err, err)
		}
		if syntax && (v != sendBody{Phone: "before", Message: "before"}) {
			t.Fatalf("%q: Unmarshal refused it and changed the value: %+v", data, v)
		}
	})
}

// BenchmarkDecodeJSON is bind's decoding of a send's body: the checks of
// decodeJSON and the decoding, without the request around them.
func BenchmarkDecodeJSON(b *testing.B) {
	data := []byte(`{"device_fingerprint":"a-phone","phone":"+15551234567","message":"Your code is 123456","sim_slot":"SIM1"}`)
	b.ReportAllocs()
	for b.Loop() {
		var v sendBody
		if err := decodeJSON(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadAllSized: readAllSized reads what io.ReadAll reads, with the
// same error (the caller drops the bytes on an error), whatever length was announced and however the reader hands
// its bytes over; with the right length, in one allocation.
func TestReadAllSized(t *testing.T) {
	for _, size := range []int{0, 1, 107, 511, 512, 513, 4096, 70 << 10} {
		data := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		for _, announced := range []int64{-1, 0, 1, int64(size) - 1, int64(size), int64(size) + 1, 1 << 20, 1 << 40} {
			for name, wrap := range map[string]func(io.Reader) io.Reader{
				"plain": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader,
				"half": iotest.HalfReader, "data with EOF": iotest.DataErrReader,
				"timeout": iotest.TimeoutReader, "error": func(r io.Reader) io.Reader { return io.MultiReader(r, iotest.ErrReader(io.ErrUnexpectedEOF)) },
			} {
				got, errGot := readAllSized(wrap(bytes.NewReader(data)), announced)
				want, errWant := io.ReadAll(wrap(bytes.NewReader(data)))
				// On an error the caller drops what was read; how much that
				// was depends on the buffer's size.
				if errGot != errWant || errWant == nil && (!bytes.Equal(got, want) || got == nil) {
					t.Errorf("%d bytes, %d announced, %s: %d bytes, %v; io.ReadAll %d bytes, %v", size, announced, name, len(got), errGot, len(want), errWant)
				}
			}
		}
	}
	src := make([]byte, 107)
	body := bytes.NewReader(src)
	if n := testing.AllocsPerRun(100, func() {
		body.Reset(src)
		bodySink, _ = readAllSized(body, 107)
	}); n > 1 {
		t.Errorf("a body of its announced length: %v allocations, want 1", n)
	}
	if c := cap(bodySink); c > 128 {
		t.Errorf("a body of 107 bytes read into a buffer of %d", c)
	}
}

var bodySink []byte
