package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store/postgres"
)

// twoNodes runs the gateways of nodes a and b, each with its own hub and
// bus connection, on one database and one NATS server, and answers the
// store and both. live is a minute (both nodes' beats, written once at
// their start, stay live through the test) and the sweeps wait an hour: a
// test sees what the signals do, not what a sweep covers.
func twoNodes(t *testing.T) (*postgres.Store, *Gateway, *Gateway) {
	t.Helper()
	const live = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	st, err := postgres.Open(ctx, pgtest.URL(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	nats := natstest.Start(t)
	log := slog.New(slog.DiscardHandler)
	node := func(name string) *Gateway {
		if err := st.RegisterNode(postgres.Node{Name: name, Instance: name, Bus: true}, live); err != nil {
			t.Fatal(err)
		}
		bus, err := Connect(ctx, Config{URL: nats, Node: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bus.Close)
		hub := gateway.New(gateway.Config{}, device.New(device.Config{}, st, time.Now), sms.New(sms.Config{}, st, log, time.Now), log, time.Now)
		g, err := NewGateway(GatewayConfig{Bus: bus, Store: st, Hub: hub, Live: live, SweepEvery: time.Hour, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		hub.SetEpochs(g)
		if err := bus.Ready(ctx); err != nil { // the subscriptions are on the server
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); g.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return g
	}
	return st, node("a"), node("b")
}

// readSend reads the phone's link until a job of the message comes,
// failing the test when none does within poll.Timeout.
func readSend(t *testing.T, ws *websocket.Conn, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the job %s: %v", id, err)
		}
		if f, _ := proto.Decode(data); f != nil && f.FrameType() == proto.TypeSend && f.(*proto.Send).ID == id {
			return
		}
	}
}

// A device deleted whose link on node a is still open (the delete's
// disconnect is on its way, or the bus lost it) and the device paired
// again under its fingerprint are two devices, on every node. The new
// device reads offline on both nodes until it links; linked on b, it reads
// online on a with b's beat; a kick for it on a reaches its link on b; and
// the old device's disconnect, run on b, closes the old link on a and
// leaves the new one open. Before, the nodes answered and acted by
// fingerprint: on a the new device read online (the old link's last seen)
// while it was linked nowhere, a's kick pumped the old link and went no
// further (the job waited for b's sweep), and b's disconnect of the old
// device closed the new device's link with 4503 (its phone stops
// reconnecting, probing at most every 15 minutes).
func TestPairedAgainWhileTheOldLinkIsOpenOnAnotherNode(t *testing.T) {
	t.Parallel()
	st, ga, gb := twoNodes(t)
	pa, pb := servePhones(t, st, ga), servePhones(t, st, gb)
	old, oldToken := pa.pair("paired-again-elsewhere")
	oldWS := pa.link(oldToken)
	d, token := pa.pairAgain(old) // in the store alone: nothing closed the old link
	fp := d.Fingerprint
	if _, open := linkOf(pa.hub, fp); !open {
		t.Fatal("the old device's link on a is not open: the test shows nothing")
	}
	nodes := map[string]*Gateway{"a": ga, "b": gb}
	for name, g := range nodes {
		if g.Online(fp, d.ID) || !g.LastSeen(fp, d.ID).IsZero() || len(g.Presence(map[string]uint64{fp: d.ID})) != 0 {
			t.Errorf("on %s the new device, linked nowhere, reads online", name)
		}
	}

	// Linked on b: online on a, seen at b's beat. A job queued first comes
	// with the link's first pump: once it came, nothing but a kick brings
	// the next.
	msgs := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now) // no dispatcher: only the test kicks
	send := func(text string) string {
		t.Helper()
		m, _, err := msgs.Send(context.Background(), sms.SendInput{CompanyID: d.CompanyID, Device: fp, Phone: "+15551234567", Message: text}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m.UUID
	}
	first := send("queued before the link")
	ws := pb.link(token)
	readSend(t, ws, first)
	beat, linked, err := st.LinkedSince(d.ID, ga.cfg.Live)
	if err != nil || !linked {
		t.Fatalf("the new device's link on b is not in the database: %v (%v)", linked, err)
	}
	if !ga.Online(fp, d.ID) {
		t.Error("on a the new device, linked on b, reads offline")
	}
	if seen := ga.Presence(map[string]uint64{fp: d.ID})[fp]; !seen.Equal(beat) || !ga.LastSeen(fp, d.ID).Equal(beat) {
		t.Errorf("on a the new device, linked on b, was last seen %v (presence) and %v, want b's beat %v", seen, ga.LastSeen(fp, d.ID), beat)
	}

	// A job of the new device, kicked on a, reaches its link on b.
	next := send("queued after the link")
	ga.Kick(fp, d.ID)
	readSend(t, ws, next)

	// The old device's disconnect, run on b, is of the old device alone.
	gb.Disconnect(fp, old.ID, proto.CloseDeviceGone, "device deleted")
	if l, ok := linkOf(pb.hub, fp); !ok || l.DeviceID != d.ID {
		t.Errorf("after the old device's disconnect the new device's link on b is %+v (listed %v), want it open", l, ok)
	}
	if code := closedWith(t, oldWS); code != proto.CloseDeviceGone {
		t.Errorf("the old device's link on a closed with %d, want %d", code, proto.CloseDeviceGone)
	}
}

// A kick message names each device by fingerprint and id, and a release
// as such, and nodes of every version read each other's: the ids and
// releases come back; a message of an older node (fingerprints alone)
// names whichever link holds each; a node of the version before releases
// (which reads the ids) finds the ids, and a release as a kick; and an
// older node, which reads every line as a fingerprint, finds the
// fingerprints and, in the other lines, none that a device could have.
func TestKickMessagesAcrossVersions(t *testing.T) {
	t.Parallel()
	kicks := []kick{{devKey{"phone-1", 7}, false}, {devKey{"phone:2.b", 1 << 40}, true}, {devKey{"phone-3", 9}, false}}
	data := wireKicks(kicks)
	if got := readKicks(data); !slices.Equal(got, kicks) {
		t.Errorf("read back %v, want %v", got, kicks)
	}
	if got, want := readKicks([]byte("phone-1\nphone-2")), []kick{{devKey: devKey{"phone-1", 0}}, {devKey: devKey{"phone-2", 0}}}; !slices.Equal(got, want) {
		t.Errorf("an older node's kicks read as %v, want %v", got, want)
	}
	// The reading of the version before releases.
	var before []devKey
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "/"); ok {
			if id, err := strconv.ParseUint(rest, 10, 64); err == nil && len(before) > 0 && before[len(before)-1].id == 0 {
				before[len(before)-1].id = id
			}
			continue
		}
		if line != "" {
			before = append(before, devKey{fp: line})
		}
	}
	if want := []devKey{{"phone-1", 7}, {"phone:2.b", 1 << 40}, {"phone-3", 9}}; !slices.Equal(before, want) {
		t.Errorf("the version before releases reads %v, want %v", before, want)
	}
	var fps []string
	for _, line := range strings.Split(string(data), "\n") { // an older node's reading
		if line == "" {
			continue
		}
		if device.CheckFingerprint("fp", line) == nil {
			fps = append(fps, line)
		} else if !strings.HasPrefix(line, "/") {
			t.Errorf("line %q is neither a fingerprint nor an id", line)
		}
	}
	if want := []string{"phone-1", "phone:2.b", "phone-3"}; !slices.Equal(fps, want) {
		t.Errorf("an older node reads the fingerprints %v, want %v", fps, want)
	}
}
