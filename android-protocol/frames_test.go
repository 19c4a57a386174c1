package androidproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestGoldenFramesRoundTrip decodes every example of testdata/ (the ones
// PROTOCOL.md shows), encodes it again and wants the same JSON back.
func TestGoldenFramesRoundTrip(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.TrimSpace(raw)
		f, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		// A file is named after its frame type, optionally with a variant: error.json, error.refused.json.
		if want, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(file), ".json"), "."); f.FrameType() != want {
			t.Errorf("%s decodes as %s", file, f.FrameType())
		}
		seen[f.FrameType()] = true
		out, err := Encode(reflect.ValueOf(f).Elem().Interface().(Frame))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, raw) {
			t.Errorf("%s:\n got %s\nwant %s", file, out, raw)
		}
	}
	for _, typ := range []string{TypeHello, TypeWelcome, TypeSend, TypeAck, TypeStatus, TypeStatusAck, TypeInbound, TypeInboundAck, TypeConfig, TypeError, TypeHealth} {
		if !seen[typ] {
			t.Errorf("no golden example of %s in testdata/", typ)
		}
	}
}

// TestGoldenFramesInProtocolDoc wants every golden frame shown in PROTOCOL.md.
func TestGoldenFramesInProtocolDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		raw, _ := os.ReadFile(file)
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, bytes.TrimSpace(raw), "", "  "); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, pretty.Bytes()) {
			t.Errorf("PROTOCOL.md does not show %s as:\n%s", file, pretty.String())
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	if _, err := Decode([]byte(`{"type":"teleport"}`)); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: got %v, want ErrUnknownType", err)
	}
	for _, bad := range []string{`{}`, `[]`, `nope`, `{"type":"ack","id":5}`} {
		if _, err := Decode([]byte(bad)); err == nil || errors.Is(err, ErrUnknownType) {
			t.Errorf("Decode(%s): got %v, want a decode error", bad, err)
		}
	}
	// Unknown fields are ignored, so newer peers can add them.
	f, err := Decode([]byte(`{"type":"ack","id":"x","future":true}`))
	if err != nil || f.(*Ack).ID != "x" {
		t.Errorf("got %v %v", f, err)
	}
}

func TestEncodeEmptyFrame(t *testing.T) {
	t.Parallel()
	out, err := Encode(Ack{})
	if err != nil || string(out) != `{"type":"ack","id":""}` {
		t.Fatalf("got %s %v", out, err)
	}
	if _, err := Decode(out); err != nil {
		t.Fatal(err)
	}
}

func TestShouldReconnect(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{1001: true, 1006: true, 1009: true, 4000: true, 4008: true, 4009: true, 4012: true, 4029: true, 4501: false, 4503: false, 4510: false} {
		if got := ShouldReconnect(code); got != want {
			t.Errorf("ShouldReconnect(%d) = %v, want %v", code, got, want)
		}
	}
}

func BenchmarkEncodeSend(b *testing.B) {
	f := Send{ID: "0b6f2f4e-5d3c-4e0a-9a57-1f5b9b0c2d11", Channel: ChannelSMS, To: "+15551234567", Message: "Your code is 481516", SIMSlot: SIM1, ExpiresAt: "2026-11-23T10:04:05.123Z"}
	for b.Loop() {
		if _, err := Encode(f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStatus(b *testing.B) {
	raw := []byte(`{"type":"status","id":"0b6f2f4e-5d3c-4e0a-9a57-1f5b9b0c2d11","status":"delivered","at":"2026-11-22T10:04:07.500Z"}`)
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// The slot names: SIM1 then SIM2, and a selected_sim is one of them or
// BOTH; nothing else passes, whatever its case or spaces.
func TestSIMSlots(t *testing.T) {
	if got := SIMSlots(); got != [2]string{"SIM1", "SIM2"} {
		t.Fatalf("SIMSlots() = %v, want [SIM1 SIM2]", got)
	}
	for _, c := range []struct {
		s              string
		slot, selected bool
	}{
		{"SIM1", true, true}, {"SIM2", true, true}, {"BOTH", false, true},
		{"", false, false}, {"sim1", false, false}, {"SIM3", false, false}, {" SIM1", false, false}, {"both", false, false},
	} {
		if IsSIMSlot(c.s) != c.slot || IsSelectedSIM(c.s) != c.selected {
			t.Errorf("%q: IsSIMSlot %v, IsSelectedSIM %v; want %v, %v", c.s, IsSIMSlot(c.s), IsSelectedSIM(c.s), c.slot, c.selected)
		}
	}
}

// Decode's one pass over an ack or a status reads it into report, which
// must hold every member of both frames, of the same kind: a member added
// to Status or Ack and not to report would be lost from every phone's
// report (each written with its type first), and FuzzDecodeReportsInOnePass
// finds it only where a seed or a fuzzing run names the new member.
func TestReportHoldsEveryMemberOfAnAckAndAStatus(t *testing.T) {
	members := func(v any) map[string]reflect.Type {
		m := map[string]reflect.Type{}
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			m[name] = f.Type
		}
		return m
	}
	read := members(report{})
	for _, fr := range []Frame{Ack{}, Status{}} {
		for name, typ := range members(fr) {
			if read[name] != typ {
				t.Errorf("%s's member %q (%v): report reads it as %v", fr.FrameType(), name, typ, read[name])
			}
		}
	}
	if read["type"] == nil {
		t.Error("report does not read the frame's type")
	}
}

// A decoded frame keeps nothing of the bytes it was read from: the
// server reads each frame into a pooled buffer (gateway's readMessage)
// that the next frame overwrites once this one is handled, while what the
// frame held (an answer's id, a report waiting for its commit) may live
// on. Every golden frame, decoded and its bytes then overwritten, encodes
// as it did.
func TestDecodedFrameKeepsNothingOfItsBytes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.TrimSpace(raw)
		buf := bytes.Clone(raw)
		f, err := Decode(buf)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for i := range buf {
			buf[i] = 'x'
		}
		if out, err := Encode(f); err != nil || !bytes.Equal(out, raw) {
			t.Errorf("%s, its bytes overwritten once decoded:\n got %s (%v)\nwant %s", file, out, err, raw)
		}
	}
}

// A welcome's ping interval is read bounded (PROTOCOL.md section 8.2): 45 s
// when none is named, at most an hour however large the number, never a
// time that overflows.
func TestWelcomePingIntervalIsBounded(t *testing.T) {
	t.Parallel()
	for secs, want := range map[int]time.Duration{
		0: 45 * time.Second, -1: 45 * time.Second, math.MinInt64: 45 * time.Second,
		1: time.Second, 45: 45 * time.Second, 3600: time.Hour,
		3601: time.Hour, 1e9: time.Hour, 4_611_686_019: time.Hour, 1e18: time.Hour, math.MaxInt64: time.Hour,
	} {
		if got := (Welcome{PingIntervalSeconds: secs}).PingInterval(); got != want {
			t.Errorf("ping_interval_seconds %d: read as %v, want %v", secs, got, want)
		}
	}
}
