package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"testing"

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
