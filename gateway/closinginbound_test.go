package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
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
	ws := r.link(t, "closing-1")
	writeFrame(t, ws, helloWithWhatsApp("+15550101111"))
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", w)
	}
	if _, err := r.store.MarkCompanyClosing(r.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	conformance.RemoveCompany(t, r.store, r.company, 1000) // and no Disconnect of the link
	inboundsRefused(t, ws, "a closing company")
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
	ws := r.link(t, "removed-1")
	if _, err := r.store.MarkCompanyClosing(r.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	conformance.RemoveCompany(t, r.store, r.company, 1000)
	writeFrame(t, ws, helloWithWhatsApp("+15550101111"))
	if code := closeCode(t, ws); code != proto.CloseDeviceGone {
		t.Errorf("a hello of a removed company: closed %d, want %d (device gone)", code, proto.CloseDeviceGone)
	}
}

// An inbound (SMS, or an agent's WhatsApp message) on a link opened
// before its company was marked closing, whose removal has not taken the
// company's devices yet (its first step failed, or runs on another node),
// is refused as one after its device was deleted (error not_found, the
// link goes on), and stores nothing; a hello naming WhatsApp numbers on
// such a link is closed 4503. The inbound was stored and acknowledged,
// for a company whose removal then took it.
func TestInboundOfACompanyMarkedClosing(t *testing.T) {
	t.Parallel()
	r := agentsRig(t)
	ws := r.link(t, "marked-1")
	writeFrame(t, ws, helloWithWhatsApp("+15550101111"))
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", w)
	}
	late := r.link(t, "marked-2") // upgraded before the mark
	if _, err := r.store.MarkCompanyClosing(r.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	inboundsRefused(t, ws, "a company marked closing")
	if n, err := r.store.StatsTotals(r.company); err != nil || n.Received != 0 {
		t.Errorf("messages received by a company marked closing: %+v (%v), want none", n, err)
	}
	writeFrame(t, late, helloWithWhatsApp("+15550102222"))
	if code := closeCode(t, late); code != proto.CloseDeviceGone {
		t.Errorf("a hello of a company marked closing: closed %d, want %d (device gone)", code, proto.CloseDeviceGone)
	}
}

// companyRowMissing is the agents' store with its reads of the company
// answering store.ErrNotFound, as a missing record of another kind (a
// bug, a race on another record) would: the device and its company are
// there.
type companyRowMissing struct{ channel.Store }

func (s companyRowMissing) Company(id uint64) (store.Company, error) {
	return store.Company{}, fmt.Errorf("store: company %d: %w", id, store.ErrNotFound)
}

func (s companyRowMissing) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	return store.Company{}, fmt.Errorf("store: company %d of device %d: %w", companyID, deviceID, store.ErrNotFound)
}

// numbersRowMissing is the agents' store with its look-up of announced
// numbers answering store.ErrNotFound.
type numbersRowMissing struct{ channel.Store }

func (s numbersRowMissing) AgentNumbersNew(uint64, string, []string) (int, int, error) {
	return 0, 0, fmt.Errorf("store: agent numbers: %w", store.ErrNotFound)
}

// A hello whose numbers' check fails with store.ErrNotFound, the device
// and its company there, is closed as the server fault it is (1011: the
// phone reconnects with backoff), not 4503: only the store's word that
// the device is gone (store.ErrDeviceGone) tells the phone its device was
// removed, after which it stops reconnecting. Any store.ErrNotFound of the
// check was taken for the company's removal.
func TestHelloNotFoundIsNoRemoval(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(channel.Store) channel.Store{
		"company read": func(s channel.Store) channel.Store { return companyRowMissing{s} },
		"numbers read": func(s channel.Store) channel.Store { return numbersRowMissing{s} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := agentsRigWith(t, wrap)
			ws := r.link(t, "row-missing")
			writeFrame(t, ws, helloWithWhatsApp("+15550101111"))
			if code := closeCode(t, ws); code != proto.CloseInternalError {
				t.Errorf("a hello whose %s found no row: closed %d, want %d (server fault)", name, code, proto.CloseInternalError)
			}
		})
	}
}

// link is a link of a new device fp of r's company, upgraded, no hello sent.
func (r *rig) link(t *testing.T, fp string) *websocket.Conn {
	t.Helper()
	ws, _, err := r.dial(r.pair(fp), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// helloWithWhatsApp is an agent's hello naming one WhatsApp number.
func helloWithWhatsApp(number string) proto.Hello {
	return proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}},
		WhatsApp: []proto.WhatsAppNumber{{Phone: number}}}
}

// inboundsRefused sends an SMS and a WhatsApp inbound on ws and wants each
// refused not_found naming its client_id, the second on the same link (the
// first did not end it).
func inboundsRefused(t *testing.T, ws *websocket.Conn, what string) {
	t.Helper()
	for _, in := range []proto.Inbound{
		{ClientID: "sms-1", Channel: proto.ChannelSMS, From: "+15550000001", Message: "hello"},
		{ClientID: "wa-1", Channel: channel.WhatsApp, From: "+15550000002", To: "+15550101111", Message: "hello"},
	} {
		writeFrame(t, ws, in)
		got := readFrame(t, ws)
		if f, ok := got.(*proto.Error); !ok || f.Code != string(problem.NotFound) || f.ClientID != in.ClientID {
			t.Fatalf("%s inbound of %s: got %#v, want error not_found for client_id %s", in.Channel, what, got, in.ClientID)
		}
	}
}

// agentsRig is a rig whose hub has the agents' channel service.
func agentsRig(t *testing.T) *rig {
	t.Helper()
	return agentsRigWith(t, nil)
}

// agentsRigWith is agentsRig with the agents' service reaching the store
// as wrap gives it (nil: as it is).
func agentsRigWith(t *testing.T, wrap func(channel.Store) channel.Store) *rig {
	t.Helper()
	st := storetest.OpenWith(t, storetest.Options{})
	var agentStore channel.Store = st
	if wrap != nil {
		agentStore = wrap(st)
	}
	return newRigHub(t, st, Config{}, time.Now, nil, hubSetup{wire: func(h *Hub, log *slog.Logger) {
		agents, err := channel.New(channel.Config{}, agentStore, log, time.Now, rand.NewPCG(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		agents.SetDispatcher(h)
		h.SetAgents(agents)
	}})
}

// markedAtAnnounce is the agents' store with the company marked closing
// just before an agent's numbers are written (AnnounceAgentNumbers): the
// mark that comes between a hello's device write and its numbers'.
type markedAtAnnounce struct {
	channel.Store
	st store.Backend
}

func (s markedAtAnnounce) AnnounceAgentNumbers(companyID, deviceID uint64, sets []store.Announced, now time.Time, limit int) ([]store.AgentNumber, error) {
	if _, err := s.st.MarkCompanyClosing(companyID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		return nil, err
	}
	return s.Store.AnnounceAgentNumbers(companyID, deviceID, sets, now, limit)
}

// An agent's hello whose company is marked closing after its device write
// and before its numbers' write is closed 4503 (device deleted), as one
// that met the mark at its device write is, and its numbers are not
// stored: the write of the numbers did not read the mark (the removal took
// them later), and the hello went on to its welcome.
func TestHelloNumbersAfterTheMark(t *testing.T) {
	t.Parallel()
	r := agentsRigWith(t, func(s channel.Store) channel.Store { return markedAtAnnounce{Store: s, st: s.(store.Backend)} })
	ws := r.link(t, "announce-marked")
	writeFrame(t, ws, helloWithWhatsApp("+15550101111"))
	if code := closeCode(t, ws); code != proto.CloseDeviceGone {
		t.Errorf("a hello whose numbers' write met the closing mark: closed %d, want %d (device gone)", code, proto.CloseDeviceGone)
	}
	if nums, err := r.store.AgentNumbers(r.company, store.ChannelNameWhatsApp); err != nil || len(nums) != 0 {
		t.Errorf("the numbers of a company marked closing: %+v (%v), want none stored", nums, err)
	}
}

// helloRowMissing is the device service with its write of a hello
// answering store.ErrNotFound, as a missing record of another kind would:
// the device and its company are there.
type helloRowMissing struct{ Devices }

func (d helloRowMissing) Hello(context.Context, store.Device, device.CheckedHello) (store.Device, error) {
	return store.Device{}, fmt.Errorf("store: a record of the hello's write: %w", store.ErrNotFound)
}

// A hello whose device write fails with store.ErrNotFound is closed as the
// server fault it is (1011: the phone reconnects with backoff), not 4503:
// only the store's word that the device is gone (store.ErrDeviceGone: the
// device deleted, another company's, its company closing or removed)
// tells the phone its device was removed, after which it stops
// reconnecting; an SMS phone's hello after its company's mark is closed
// 4503 on that word.
func TestHelloWriteNotFoundIsNoRemoval(t *testing.T) {
	t.Parallel()
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{devices: func(s *device.Service) Devices { return helloRowMissing{s} }})
	ws := r.link(t, "hello-row-missing")
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if code := closeCode(t, ws); code != proto.CloseInternalError {
		t.Errorf("a hello whose write found no row: closed %d, want %d (server fault)", code, proto.CloseInternalError)
	}

	closing := newRig(t, Config{})
	late := closing.link(t, "hello-after-mark")
	if _, err := closing.store.MarkCompanyClosing(closing.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	writeFrame(t, late, proto.Hello{Protocol: 1, AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if code := closeCode(t, late); code != proto.CloseDeviceGone {
		t.Errorf("an SMS phone's hello after its company's mark: closed %d, want %d (device gone)", code, proto.CloseDeviceGone)
	}
}
