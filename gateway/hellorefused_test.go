package gateway

import (
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A link refused at its hello stores nothing of the device, its last seen
// included (PROTOCOL.md section 16.1: the device's last seen stays as the
// last hello taken left it). Its end wrote the time of its upgrade as the
// device's last seen: so a phone whose token was revoked (its device paired
// again) after its upgrade, or whose device was disabled meanwhile, still
// moved the device's last seen, by a hello refused or none at all. The
// device here never linked: its last seen stays empty.
func TestRefusedHelloStoresNoLastSeen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		hello func(*websocket.Conn) // nil: no hello in time
		code  websocket.StatusCode
		// wait is the hello timeout: the bad hello's is long enough for
		// the second pairing before it (a store write: it took longer
		// than 200 ms once under load, and the link ended 4001).
		wait time.Duration
	}{
		{"bad hello", func(ws *websocket.Conn) { writeFrame(t, ws, proto.Hello{Protocol: 2}) }, proto.CloseUnsupportedVer, 10 * time.Second},
		{"no hello", nil, proto.CloseHelloTimeout, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{HelloTimeout: tc.wait, PingInterval: time.Hour})
			fp := "refused-" + tc.name[:2]
			old := r.pair(fp)
			ws, _, err := r.dial(old, nil) // upgraded: the token is live
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.CloseNow() })
			r.pair(fp) // paired again: the link's token is revoked
			if tc.hello != nil {
				tc.hello(ws)
			}
			if code := closeAfterBacklog(t, ws); code != tc.code {
				t.Fatalf("closed with %d, want %d", code, tc.code)
			}
			poll.Until(t, "the refused link's goroutines ended", func() bool { return r.hub.running() == "" })
			if d, err := r.store.Device(fp); err != nil || !d.LastSeenAt.IsZero() {
				t.Fatalf("the device after a link refused at its hello: last seen %v (%v), want none", d.LastSeenAt, err)
			}
		})
	}
}
