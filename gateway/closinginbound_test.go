package gateway

import (
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// An inbound (SMS, or an agent's WhatsApp message) that arrives on a
// link its company's removal has not closed yet (the removal ran on
// another node, or after a restart, or its list of the company's devices
// failed), once the removal took the company's record, is refused as one
// after its device was deleted: error not_found naming the inbound's
// client_id, which the phone drops (PROTOCOL.md section 10.2), and the
// link goes on. The read of the company's region found no company and was
// taken for a server fault: close 1011, after which the phone sent the
// message again on every link.
func TestInboundOfAClosingCompany(t *testing.T) {
	t.Parallel()
	r := agentsRig(t)
	ws, _, err := r.dial(r.pair("closing-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}},
		WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550101111"}}})
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", w)
	}
	if _, err := r.store.MarkCompanyClosing(r.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	conformance.RemoveCompany(t, r.store, r.company, 1000) // and no Disconnect of the link
	// The second is answered on the same link: the first did not end it.
	for _, in := range []proto.Inbound{
		{ClientID: "sms-1", Channel: proto.ChannelSMS, From: "+15550000001", Message: "hello"},
		{ClientID: "wa-1", Channel: channel.WhatsApp, From: "+15550000002", To: "+15550101111", Message: "hello"},
	} {
		writeFrame(t, ws, in)
		got := readFrame(t, ws)
		if f, ok := got.(*proto.Error); !ok || f.Code != string(problem.NotFound) || f.ClientID != in.ClientID {
			t.Fatalf("%s inbound of a closing company: got %#v, want error not_found for client_id %s", in.Channel, got, in.ClientID)
		}
	}
}

// A hello that names WhatsApp numbers on a link upgraded before its
// company's removal, and sent once the removal took the company's record,
// is closed 4503 (device deleted), as a hello whose device is gone is
// (PROTOCOL.md section 7.1). The read of the company's region, to check
// the numbers, found no company and was taken for a server fault: close
// 1011, after which the phone reconnects; 4503 tells it to stop.
func TestHelloOfARemovedCompany(t *testing.T) {
	t.Parallel()
	r := agentsRig(t)
	ws, _, err := r.dial(r.pair("removed-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, err := r.store.MarkCompanyClosing(r.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	conformance.RemoveCompany(t, r.store, r.company, 1000)
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}},
		WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550101111"}}})
	if code := closeCode(t, ws); code != proto.CloseDeviceGone {
		t.Errorf("a hello of a removed company: closed %d, want %d (device gone)", code, proto.CloseDeviceGone)
	}
}

// agentsRig is a rig whose hub has the agents' channel service.
func agentsRig(t *testing.T) *rig {
	t.Helper()
	st := storetest.OpenWith(t, storetest.Options{})
	return newRigHub(t, st, Config{}, time.Now, nil, hubSetup{wire: func(h *Hub, log *slog.Logger) {
		agents, err := channel.New(channel.Config{}, st, log, time.Now, rand.NewPCG(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		agents.SetDispatcher(h)
		h.SetAgents(agents)
	}})
}
