package gateway

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// TestLongStatusErrorIsCutOnARune: a failed status's error text is kept to
// its first 200 bytes. Cut inside a character, it was no longer UTF-8:
// bbolt kept the broken bytes and PostgreSQL a U+FFFD in their place. It is
// cut at the character boundary before byte 200, the same on both stores.
func TestLongStatusErrorIsCutOnARune(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "hi"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	send, ok := readFrame(t, ws).(*proto.Send)
	if !ok {
		t.Fatalf("got %#v, want the send", send)
	}
	writeFrame(t, ws, proto.Ack{ID: send.ID})
	// 199 ASCII bytes, then a two-byte character across byte 200.
	long := strings.Repeat("a", 199) + "é" + strings.Repeat("b", 50)
	writeFrame(t, ws, proto.Status{ID: send.ID, Status: proto.StatusFailed, Error: long})
	if f, ok := readFrame(t, ws).(*proto.StatusAck); !ok || f.ID != send.ID {
		t.Fatalf("got %#v, want the status_ack", f)
	}
	got, err := r.sms.Queued(context.Background(), r.company, m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.MsgFailed || got.Error != strings.Repeat("a", 199) || !utf8.ValidString(got.Error) {
		t.Fatalf("stored %s %q, want failed with the 199 bytes before the cut character", got.Status, got.Error)
	}
}
