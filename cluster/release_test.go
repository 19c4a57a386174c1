package cluster

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/pacing"
)

// passedOver sets up two nodes whose agent channels tell the gateways
// (release on a, the delete's Released when released is true): agent X,
// linked on b, is handed a job and drops its link before the ack; agent Y
// then links on b with the number and passes over the job, which stays
// X's while X exists. It answers the gateways, b's phones, Y's link and
// the job's id.
func passedOver(t *testing.T, released bool) (ga, gb *Gateway, pb *phones, wsY *websocket.Conn, job string) {
	t.Helper()
	st, ga, gb := twoNodes(t)
	log := slog.New(slog.DiscardHandler)
	fast := channel.Pacing{Caps: pacing.Caps{PerMinute: 1000, PerHour: 10000, PerDay: 60000}, Gap: pacing.Gap{Min: time.Millisecond, Max: time.Millisecond}}
	agents := func(g *Gateway) *channel.Service {
		s, err := channel.New(channel.Config{WhatsApp: fast, IMessage: fast}, st, log, time.Now, rand.NewPCG(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		s.SetDispatcher(g)
		return s
	}
	onA, onB := agents(ga), agents(gb)
	gb.hub.(*gateway.Hub).SetAgents(onB) // before it serves
	pb = servePhones(t, st, gb)
	if released {
		pb.devices.OnDelete(onA.Released) // the deletion runs on a
	}
	const number = "+15550108888"
	hello := proto.Hello{Protocol: 1, AppVersion: "agent test", WhatsApp: []proto.WhatsAppNumber{{Phone: number}}}
	_, tokenX := pb.pair("release-agent-x")
	y, tokenY := pb.pair("release-agent-y")

	x := pb.linkHello(tokenX, hello)
	nums, err := onB.Numbers(context.Background(), pb.company, channel.WhatsApp)
	if err != nil || len(nums) != 1 {
		t.Fatalf("numbers: %v (%v), want the one", nums, err)
	}
	m, _, err := onB.Send(context.Background(), channel.SendInput{CompanyID: pb.company, Channel: channel.WhatsApp, NumberID: nums[0].PublicID,
		To: "+15551234567", Content: "handed to X"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	readSend(t, x, m.UUID)
	x.CloseNow() // its ack never came: the job stays X's

	wsY = pb.linkHello(tokenY, hello) // passes over X's job
	if ga.hub.Online(y.Fingerprint, y.ID) {
		t.Fatal("Y is linked on a: the test shows nothing")
	}
	return ga, gb, pb, wsY, m.UUID
}

// A release (an agent deleted on one node) reaches the link of the
// number's holder on another node as a release: that link reads again the
// job it passed over as the deleted agent's, which is its own now. A kick
// for a new job does not read it again (gateway's Hub.Kick), so a release
// told the other nodes as a plain kick left the job waiting for the link
// sweep (an hour here).
func TestReleaseReachesTheLinkOnAnotherNode(t *testing.T) {
	t.Parallel()
	_, _, pb, wsY, job := passedOver(t, true)
	if _, err := pb.devices.Delete(context.Background(), pb.company, "release-agent-x"); err != nil {
		t.Fatal(err)
	}
	readSend(t, wsY, job)
}

// A release the bus lost (here, never sent) is made good by the sweep of
// the node holding the link, as a lost kick is: the sweep releases every
// link it pumps.
func TestSweepReleases(t *testing.T) {
	t.Parallel()
	_, gb, pb, wsY, job := passedOver(t, false)
	if _, err := pb.devices.Delete(context.Background(), pb.company, "release-agent-x"); err != nil {
		t.Fatal(err)
	}
	gb.sweep()
	readSend(t, wsY, job)
}
