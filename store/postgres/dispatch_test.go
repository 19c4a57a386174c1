package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// A message moved to another device (a failover writes its device_id,
// moveJobs) leaves the first device's conversation, which falls back to
// its newest remaining message or goes when it has none, and joins the
// other's. A write that moves it otherwise (updateSend, which no path uses
// to move a message) is refused by the guard of migration 0024, the
// conversations untouched, rather than counted on the device it left.
func TestConversationFollowsAMovedMessage(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	a := conformance.Device(t, s, c.ID, "fp-a")
	b := conformance.Device(t, s, c.ID, "fp-b")
	at := conformance.T0
	receive := func(d store.Device, phone, clientID string) store.Message {
		t.Helper()
		m := store.Message{UUID: "u-" + clientID, CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: phone, Text: clientID, ClientID: clientID}
		out, _, err := s.StoreInbound(&m, func() time.Time { return at })
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := receive(a, "+15550000001", "first")
	second := receive(a, "+15550000001", "second")
	alone := receive(a, "+15550000002", "alone")
	own := receive(b, "+15550000001", "b's")
	moved := second
	moved.DeviceID, moved.Device = b.ID, b.Fingerprint
	if err := s.write("move", func(t *txn) error { return updateSend(t, moved) }); err == nil || !strings.Contains(err.Error(), "without its conversation") {
		t.Fatalf("a message moved by updateSend: %v, want the move refused", err)
	}
	if err := s.write("move", func(t *txn) error {
		return moveJobs(t, []store.Message{second, alone}, []store.Device{b, b})
	}); err != nil {
		t.Fatal(err)
	}
	convs := func(d store.Device) map[string]store.Conversation {
		t.Helper()
		cs, err := s.Conversations(c.ID, d.Fingerprint, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.Conversation{}
		for _, cv := range cs {
			out[cv.Phone] = cv
		}
		return out
	}
	ca, cb := convs(a), convs(b)
	if len(ca) != 1 || ca["+15550000001"].MessageCount != 1 || ca["+15550000001"].LastID != first.ID {
		t.Fatalf("device a: %+v, want one conversation of its first message only", ca)
	}
	if len(cb) != 2 || cb["+15550000001"].MessageCount != 2 || cb["+15550000001"].LastID != own.ID || cb["+15550000002"].LastID != alone.ID {
		t.Fatalf("device b: %+v, want the moved messages counted, its own still the newest", cb)
	}
	if msgs, total, err := s.History(c.ID, "fp-b", "+15550000001", 1, 10); err != nil || total != 2 || len(msgs) != 2 || msgs[0].ID != own.ID || msgs[1].ID != second.ID {
		t.Fatalf("b's history: %d of %d (%v), want its own then the moved one", len(msgs), total, err)
	}
}
