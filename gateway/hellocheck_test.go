package gateway

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// eventLog records the device events the store committed (its
// DeviceEvents' Committed), by type.
type eventLog struct {
	mu    sync.Mutex
	types []string
}

func (l *eventLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.types...)
}

// recordDeviceEvents has st queue one delivery for each event a device's
// change raises, to the company's one webhook entry, and log it once
// committed.
func recordDeviceEvents(t *testing.T, st store.Backend, companyID uint64) *eventLog {
	t.Helper()
	l := &eventLog{}
	st.SetDeviceEvents(store.DeviceEvents{
		Build: func(set store.WebhookSet, d store.Device, ev store.DeviceEvent) (store.WebhookEvent, []store.WebhookDelivery, error) {
			id := ev.Type + "-" + ev.At.Format(time.RFC3339Nano)
			return store.WebhookEvent{ID: id, Body: []byte(`{"type":"` + ev.Type + `"}`)},
				[]store.WebhookDelivery{{UUID: id, EventType: ev.Type, WebhookID: set.Entries[0].ID, CreatedAt: ev.At, NextAttemptAt: ev.At}}, nil
		},
		Committed: func(_ store.Device, ev store.DeviceEvent, _ store.OutboxAdd) {
			l.mu.Lock()
			l.types = append(l.types, ev.Type)
			l.mu.Unlock()
		},
	})
	if _, err := st.UpdateWebhookSet(companyID, time.Now(), func(w *store.WebhookSet) error {
		w.Entries = append(w.Entries, store.WebhookEntry{URL: "https://hooks.example.com/devices", Active: true, Events: []string{"device.online"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

// A hello that arrives after the link's token was revoked (the device
// paired again), or its device disabled, or its company marked closing,
// since the upgrade checked them, stores nothing of the device: its SIMs,
// app version, health, last seen and presence stay as they were, no
// device.online is raised, and the link is closed with the code PROTOCOL.md
// section 7.1 gives the change (4501, 4503). The hello's own write checks
// the token, the status and the company in its transaction. It stored the
// hello and raised device.online, and only the second look, after the
// link was registered, refused it and reported the device down. The phone
// here sends its hello only once the change is committed.
func TestHelloAfterRevocationStoresNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(r *rig, fp string) string // the device's token now, when it has a live one
		code   websocket.StatusCode
	}{
		{"token revoked", func(r *rig, fp string) string { return r.pair(fp) }, proto.CloseBadToken},
		{"device disabled", func(r *rig, fp string) string {
			disabled := store.DeviceDisabled
			if _, err := r.devices.Update(context.Background(), r.company, fp, device.Patch{Status: &disabled}); err != nil {
				r.t.Fatal(err)
			}
			return ""
		}, proto.CloseDeviceGone},
		{"company closing", func(r *rig, fp string) string {
			if _, err := r.store.MarkCompanyClosing(r.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
				r.t.Fatal(err)
			}
			return ""
		}, proto.CloseDeviceGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storetest.OpenWith(t, storetest.Options{})
			pl := &presenceLog{}
			r := newRigHub(t, st, Config{PingInterval: time.Hour}, time.Now, nil, hubSetup{
				wire: func(h *Hub, _ *slog.Logger) { h.SetPresence(pl) }})
			events := recordDeviceEvents(t, st, r.company)
			const fp = "late-hello"
			ws, _, err := r.dial(r.pair(fp), nil) // upgraded: the token is live
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.CloseNow() })
			live := tc.change(r, fp)
			before, err := st.Device(fp)
			if err != nil {
				t.Fatal(err)
			}
			battery := 80
			writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "late 2.0", SelectedSIM: "SIM2",
				SIMs: []proto.SIM{{Slot: "SIM2", PhoneNumber: "+15550101234"}}, Health: &proto.Health{Battery: &battery}})
			if code := closeAfterBacklog(t, ws); code != tc.code {
				t.Fatalf("closed with %d, want %d", code, tc.code)
			}
			poll.Until(t, "the refused link's goroutines ended", func() bool { return r.hub.running() == "" })
			after, err := st.Device(fp)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after, before) {
				t.Errorf("the device after a hello refused at its write:\n%+v\nwant it as before the hello:\n%+v", after, before)
			}
			if got := events.got(); len(got) != 0 {
				t.Errorf("events raised by the refused hello: %v, want none", got)
			}
			pl.mu.Lock()
			ups, downs := pl.ups, pl.downs
			pl.mu.Unlock()
			if ups != 0 || downs != 0 {
				t.Errorf("presence told up %d, down %d times; want neither (the device was never reported online)", ups, downs)
			}
			if live != "" {
				// The phone with the device's token now links, and its
				// hello raises what the refused one did not.
				r.connect(live)
				poll.Until(t, "device.online of the live token's hello", func() bool { return reflect.DeepEqual(events.got(), []string{"device.online"}) })
			}
		})
	}
}
