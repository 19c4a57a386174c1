package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/sms"
)

// Two settings changes made at once give the phone the one the store kept
// last, whichever order their pushes come in (PROTOCOL.md 8.9). The
// pushes are in the order the requests got to them, not the order they
// wrote: a push that carried its own change's settings left the phone
// with the older change's name while the store held the newer one.
func TestConfigureGivesThePhoneTheStoredSettings(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	older, newer := r.rename("pixel-1", "older"), r.rename("pixel-1", "newer")
	id := r.id("pixel-1")
	r.hub.Configure("pixel-1", id, newer)
	r.hub.Configure("pixel-1", id, older) // the older change's push, come last
	if got := lastConfig(t, ws, 2); got.DeviceName != "newer" {
		t.Fatalf("the phone's last config names %q, want the stored %q", got.DeviceName, "newer")
	}
}

// The same for the pace: a pace change whose push comes after a later
// change's leaves the link with the pace the store kept. The link kept the
// older change's pace (one a minute) where the store said none.
func TestPaceGivesTheLinkTheStoredPace(t *testing.T) {
	t.Parallel()
	r, ws := pacedLink(t, 2)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m0" {
		t.Fatalf("got %#v, want m0 at once", s)
	}
	none := 0
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &none}); err != nil {
		t.Fatal(err)
	}
	id := r.id("pixel-1")
	r.hub.Pace("pixel-1", id, 0)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m1" {
		t.Fatalf("got %#v, want m1 once the pace is lifted", s)
	}
	r.hub.Pace("pixel-1", id, 1) // the older change's push (one a minute), come last
	r.queue("pixel-1", "m2", "m3")
	for _, want := range []string{"m2", "m3"} {
		if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != want {
			t.Fatalf("got %#v, want %s at once: the store says no pace", s, want)
		}
	}
}

// A settings control heard from another node (Refresh) and a change made
// on this node (Configure) take their turns on the link: the control's
// read, made before the change, does not reach the phone after the
// change's settings. It did: the phone ended with the name the store no
// longer held.
func TestRefreshAndConfigureTakeTurns(t *testing.T) {
	t.Parallel()
	r, h, release := heldRig(t, afterDevice)
	ws := r.connect(r.pair("pixel-1"))
	r.rename("pixel-1", "older")
	id := r.id("pixel-1")
	h.hold.Store(true)
	refreshed := make(chan struct{})
	go func() { defer close(refreshed); r.hub.Refresh("pixel-1", id) }()
	<-h.called // the control read "older", and waits
	newer := r.rename("pixel-1", "newer")
	configured := make(chan struct{})
	go func() { defer close(configured); r.hub.Configure("pixel-1", id, newer) }()
	// Configure either waits for the control's turn, or (it did) pushed
	// at once; either way the control then goes on.
	select {
	case <-configured:
	case <-time.After(200 * time.Millisecond):
	}
	release()
	<-refreshed
	<-configured
	if got := lastConfig(t, ws, 2); got.DeviceName != "newer" {
		t.Fatalf("the phone's last config names %q, want the stored %q", got.DeviceName, "newer")
	}
}

// A pace change made while a new link is under its second look, which
// read the device before it, stands: the look's older pace (one a minute)
// does not replace it. It did: the link paced its sends where the store
// said none.
func TestPaceSetDuringTheSecondLookStands(t *testing.T) {
	t.Parallel()
	r, h, release := heldRig(t, afterToken)
	token := r.pair("pixel-1")
	one, none := 1, 0
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &one}); err != nil {
		t.Fatal(err)
	}
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	h.helloHeld(t, ws) // the look read one a minute, and waits
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &none}); err != nil {
		t.Fatal(err)
	}
	paced := make(chan struct{})
	go func() { defer close(paced); r.hub.Pace("pixel-1", r.id("pixel-1"), 0) }()
	select { // Pace waits for the look's turn, or (it did) set the pace at once
	case <-paced:
	case <-time.After(200 * time.Millisecond):
	}
	release()
	<-paced
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want the welcome", w)
	}
	r.queue("pixel-1", "m0", "m1")
	for i := range 2 {
		if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != fmt.Sprint("m", i) {
			t.Fatalf("got %#v, want m%d at once: the store says no pace", s, i)
		}
	}
}

// queue queues an SMS of each text to the device.
func (r *rig) queue(fingerprint string, texts ...string) {
	r.t.Helper()
	for _, text := range texts {
		if _, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: fingerprint, Phone: "+15551234567", Message: text}, nil); err != nil {
			r.t.Fatal(err)
		}
	}
}

// rename stores name as the device's and returns the config frame of its
// settings then.
func (r *rig) rename(fingerprint, name string) proto.Config {
	r.t.Helper()
	d, err := r.devices.Update(context.Background(), r.company, fingerprint, device.Patch{DeviceName: &name})
	if err != nil {
		r.t.Fatal(err)
	}
	return configOf(d)
}

// selectSIM stores sim as the device's selected SIM and returns the
// config frame of its settings then.
func (r *rig) selectSIM(fingerprint, sim string) proto.Config {
	r.t.Helper()
	d, err := r.devices.Update(context.Background(), r.company, fingerprint, device.Patch{SelectedSIM: &sim})
	if err != nil {
		r.t.Fatal(err)
	}
	return configOf(d)
}

// pace stores perMinute as the device's pace and tells the hub, as a
// settings change does.
func (r *rig) pace(fingerprint string, perMinute int) {
	r.t.Helper()
	if _, err := r.devices.Update(context.Background(), r.company, fingerprint, device.Patch{SMSPerMinute: &perMinute}); err != nil {
		r.t.Fatal(err)
	}
	r.hub.Pace(fingerprint, r.id(fingerprint), perMinute)
}

// lastConfig reads n config frames and returns the last.
func lastConfig(t *testing.T, ws *websocket.Conn, n int) *proto.Config {
	t.Helper()
	var last *proto.Config
	for range n {
		f, ok := readFrame(t, ws).(*proto.Config)
		if !ok {
			t.Fatalf("got %#v, want a config", f)
		}
		last = f
	}
	return last
}
