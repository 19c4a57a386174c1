package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
)

// pacedOnce is a rig whose device pixel-1 sends one SMS a minute, linked,
// that took m0 of its two queued sends and reported it (the report
// answered, so its ack is stored): m1 waits the minute. It returns the
// device's token too.
func pacedOnce(t *testing.T) (*rig, *websocket.Conn, string) {
	t.Helper()
	r := newRig(t, Config{})
	token := r.pair("pixel-1")
	one := 1
	if _, err := r.devices.Update(context.Background(), r.company, "pixel-1", device.Patch{SMSPerMinute: &one}); err != nil {
		t.Fatal(err)
	}
	ws := r.connect(token)
	r.queue("pixel-1", "m0", "m1")
	first, ok := readFrame(t, ws).(*proto.Send)
	if !ok || first.Message != "m0" {
		t.Fatalf("got %#v, want m0 at once", first)
	}
	writeFrame(t, ws, proto.Ack{ID: first.ID})
	writeFrame(t, ws, proto.Status{ID: first.ID, Status: "sent"})
	if a, ok := readFrame(t, ws).(*proto.StatusAck); !ok || a.ID != first.ID {
		t.Fatalf("got %#v, want m0's status_ack", a)
	}
	return r, ws, token
}

// heldByThePace checks that the link's next send waits for the pace: a
// probe's answer comes first; lifting the pace then lets m1 go.
func heldByThePace(t *testing.T, r *rig, ws *websocket.Conn) {
	t.Helper()
	writeFrame(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readFrame(t, ws).(*proto.InboundAck); !ok {
		t.Fatalf("got %#v, want the probe's ack before the paced send", f)
	}
	r.pace("pixel-1", 0)
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != "m1" {
		t.Fatalf("got %#v, want m1 once the pace is lifted", s)
	}
}

// A paced device that reconnects goes on at its pace from its last send
// on the link before (docs/pacing.md): its new link does not send at once.
// A new link started with a full pace of its own, and sent m1 a moment
// after m0, where one a minute holds it a minute.
func TestPaceOutlivesTheLink(t *testing.T) {
	t.Parallel()
	r, ws, token := pacedOnce(t)
	ws.Close(websocket.StatusNormalClosure, "")
	eventually(t, "the link gone", func() bool { return r.hub.Count() == 0 })
	heldByThePace(t, r, r.connect(token))
}

// The same while the older link is still up as the new one comes (newest
// wins, 4009): both pace by the device's one limiter.
func TestPaceIsTheDevicesAcrossItsLinks(t *testing.T) {
	t.Parallel()
	r, first, token := pacedOnce(t)
	second := r.connect(token)
	if got := closeAfterBacklog(t, first); got != proto.CloseReplaced {
		t.Fatalf("the first link: got close %d, want 4009", got)
	}
	heldByThePace(t, r, second)
}

// The hub keeps a device's pace only while a link holds it and for its
// window after the last let it go (a minute at one a minute): by then a
// new limiter would be as full. So it holds the paces of devices linked
// in about the last two minutes, not of every device ever paced.
func TestPaceIsForgottenAfterItsWindow(t *testing.T) {
	t.Parallel()
	r, ws, _ := pacedOnce(t)
	id := r.id("pixel-1")
	kept := func(now time.Time) bool {
		r.hub.paceMu.Lock()
		defer r.hub.paceMu.Unlock()
		r.hub.forgetPaces(now)
		_, ok := r.hub.paces[id]
		return ok
	}
	if !kept(time.Now().Add(time.Hour)) {
		t.Fatal("the pace of a live link was forgotten")
	}
	ws.Close(websocket.StatusNormalClosure, "")
	eventually(t, "the link gone", func() bool { return r.hub.Count() == 0 })
	r.hub.paceMu.Lock()
	freed := r.hub.paces[id].freed
	r.hub.paceMu.Unlock()
	if !kept(freed.Add(time.Minute - time.Millisecond)) {
		t.Fatal("the pace was forgotten within its window")
	}
	if kept(freed.Add(time.Minute)) {
		t.Fatal("the pace was kept past its window")
	}
}

// The scan runs as links end, at most once a minute: a device's pace
// whose window ended is dropped at the next link's end after that.
func TestPacesAreSweptAsLinksEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	fast := 600 // a window of 100 ms
	for _, fp := range []string{"pixel-1", "pixel-2"} {
		token := r.pair(fp)
		if _, err := r.devices.Update(context.Background(), r.company, fp, device.Patch{SMSPerMinute: &fast}); err != nil {
			t.Fatal(err)
		}
		ws := r.connect(token)
		ws.Close(websocket.StatusNormalClosure, "")
		eventually(t, "the link gone", func() bool { return r.hub.Count() == 0 })
		if fp == "pixel-1" {
			r.hub.paceMu.Lock()
			freed := r.hub.paces[r.id(fp)].freed
			r.hub.pacesSwept = time.Time{} // the last scan long ago
			r.hub.paceMu.Unlock()
			eventually(t, "pixel-1's window over", func() bool { return time.Since(freed) >= 100*time.Millisecond })
		}
	}
	r.hub.paceMu.Lock()
	defer r.hub.paceMu.Unlock()
	if _, ok := r.hub.paces[r.id("pixel-1")]; ok {
		t.Error("pixel-1's pace kept past its window and a scan")
	}
	if _, ok := r.hub.paces[r.id("pixel-2")]; !ok {
		t.Error("pixel-2's pace dropped within its window")
	}
}
