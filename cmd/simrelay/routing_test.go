package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	natsd "github.com/nats-io/nats-server/v2/server"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// send queues an SMS for the device through the server at url; its queue id.
func send(t *testing.T, url, apiKey, fp, text string) string {
	t.Helper()
	code, body := call(t, "POST", url+"/chat/send", apiKey, map[string]string{"device_fingerprint": fp, "phone": "+15551234567", "message": text})
	id, _ := body["queueId"].(string)
	if code != 200 && code != 201 && code != 202 || id == "" {
		t.Fatalf("send through %s: %d %v", url, code, body)
	}
	return id
}

// The gateway across three nodes on one database and one bus: a send on
// node B reaches the phone linked on A; the phone linking again on C closes
// its link on A with 4009; B lists it online; a rename on B reaches the
// phone on C as config; B lists the number of the agent on A online, and a
// WhatsApp send on B reaches the agent; disabling it on B closes its link on
// C with 4503; and with the bus gone, a send on B still reaches a phone on A
// through A's sweep.
func TestRoutingAcrossNodes(t *testing.T) {
	clusterTest(t)
	bin, db, st, apiKey, nats := clusterParts(t)
	node := func(name string, st testStore) *server {
		return startServer(t, bin, st, "--node-name", name, "--nats-url", nats.ClientURL(), "--link-sweep", "300ms")
	}
	a := node("a", st)
	b := node("b", testStore{dir: t.TempDir(), databaseURL: db})
	c := node("c", testStore{dir: t.TempDir(), databaseURL: db})

	register := func(fp string) client.Registration { return pairDevice(t, a.url, apiKey, fp) }
	reg := register("moving-phone")
	onA := linkRouted(t, a.url, reg.DeviceToken)
	id := send(t, b.url, apiKey, "moving-phone", "from b")
	poll.Within(t, 10*time.Second, "the send on b reaches the phone on a", func() bool { return onA.got(id) })

	onC := linkRouted(t, c.url, reg.DeviceToken)
	poll.Within(t, 10*time.Second, "the phone's link on a closed with 4009", func() bool { return onA.closedWith(proto.CloseReplaced) })
	onA.stop()
	id = send(t, b.url, apiKey, "moving-phone", "to c")
	poll.Within(t, 10*time.Second, "the send on b reaches the phone on c", func() bool { return onC.got(id) })
	if code, body := get(t, b.url+"/device/list", apiKey); code != 200 || !strings.Contains(string(body), `"online":true`) {
		t.Errorf("b's device list: %d %s, want the phone online", code, body)
	}

	if code, body := call(t, "PATCH", b.url+"/device/moving-phone", apiKey, map[string]string{"device_name": "renamed on b"}); code != 200 {
		t.Fatalf("rename on b: %d %v", code, body)
	}
	poll.Within(t, 10*time.Second, "the phone on c gets the config of b's change", func() bool { return onC.named("renamed on b") })
	if code, body := call(t, "PATCH", b.url+"/device/moving-phone", apiKey, map[string]string{"status": "disabled"}); code != 200 {
		t.Fatalf("disable on b: %d %v", code, body)
	}
	poll.Within(t, 10*time.Second, "the phone's link on c closed with 4503", func() bool { return onC.closedWith(proto.CloseDeviceGone) })
	onC.stop()
	poll.Within(t, 15*time.Second, "b lists the disabled phone offline", func() bool {
		_, body := get(t, b.url+"/device/list", apiKey)
		return !strings.Contains(string(body), `"online":true`)
	})

	// A WhatsApp agent on a gets the send made on b.
	agent := linkRouted(t, a.url, register("wa-agent").DeviceToken, proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}})
	var numbers struct {
		Numbers []struct {
			NumberID string `json:"number_id"`
			Online   bool   `json:"online"`
		}
	}
	_, body := get(t, b.url+"/whatsapp/numbers", apiKey)
	if err := json.Unmarshal(body, &numbers); err != nil || len(numbers.Numbers) != 1 {
		t.Fatalf("b's WhatsApp numbers: %s", body)
	}
	if !numbers.Numbers[0].Online {
		t.Errorf("b's WhatsApp numbers: %s, want the number of the agent linked on a online", body)
	}
	code, sent := call(t, "POST", b.url+"/whatsapp/send", apiKey, map[string]string{"number_id": numbers.Numbers[0].NumberID, "to": "+15551234567", "content": "hi from b"})
	waID, _ := sent["id"].(string)
	if code != 202 || waID == "" {
		t.Fatalf("WhatsApp send on b: %d %v", code, sent)
	}
	poll.Within(t, 10*time.Second, "the WhatsApp send on b reaches the agent on a", func() bool { return agent.got(waID) })

	// No bus: the kick is lost, and a's sweep pumps the job.
	other := linkRouted(t, a.url, register("quiet-phone").DeviceToken)
	nats.Shutdown()
	id = send(t, b.url, apiKey, "quiet-phone", "no bus")
	poll.Within(t, 15*time.Second, "the send on b reaches the phone on a without a bus", func() bool { return other.got(id) })
	// No bus: the link signal is lost, and a's sweep closes the older link.
	other.stop()
	fenced := register("fenced-phone").DeviceToken
	older := linkRouted(t, a.url, fenced)
	linkRouted(t, b.url, fenced)
	poll.Within(t, 15*time.Second, "a's sweep closes the older link with 4009 without a bus", func() bool { return older.closedWith(proto.CloseReplaced) })
}

// A node killed with its phones linked: a live node's sweep ends its links
// once its beat is older than the live window, and device presence reports
// offline the phone that linked nowhere within the grace, not the one that
// linked again on the live node.
func TestDeadNodesPhonesReportedOffline(t *testing.T) {
	clusterTest(t)
	a, b, apiKey, events := eventsCluster(t, "2s")
	tokens := map[string]string{}
	phones := map[string]*link{}
	for _, fp := range []string{"gone-phone", "moved-phone"} {
		reg := pairDevice(t, a.url, apiKey, fp)
		tokens[fp] = reg.DeviceToken
		phones[fp] = linkRouted(t, a.url, reg.DeviceToken)
	}
	poll.Within(t, 15*time.Second, "both phones reported online", func() bool {
		n := events("device.online")
		return n["gone-phone"] >= 1 && n["moved-phone"] >= 1
	})

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	phones["gone-phone"].stop()
	phones["moved-phone"].stop()
	linkRouted(t, b.url, tokens["moved-phone"])

	poll.Within(t, 30*time.Second, "device.offline for the phone of the dead node", func() bool { return events("device.offline")["gone-phone"] >= 1 })
	if code, body := get(t, b.url+"/device/list", apiKey); code != 200 || strings.Count(string(body), `"online":true`) != 1 {
		t.Errorf("b's device list: %d %s, want one phone online", code, body)
	}
	if n := events("device.offline")["moved-phone"]; n != 0 {
		t.Errorf("the phone linked again on b was reported offline %d times", n)
	}
}

// A phone whose link ended on a node killed within the grace: that node
// held the offline check in its memory and took it along. A live node's
// sweep runs it again: the phone is reported offline (before, it read
// online in its record, with no device.offline and no mail, until it
// linked again).
func TestPhoneOfANodeKilledInItsGraceReportedOffline(t *testing.T) {
	clusterTest(t)
	a, b, apiKey, events := eventsCluster(t, "5s")
	reg := pairDevice(t, a.url, apiKey, "left-phone")
	phone := linkRouted(t, a.url, reg.DeviceToken)
	poll.Within(t, 15*time.Second, "the phone reported online", func() bool { return events("device.online")["left-phone"] >= 1 })
	phone.stop()
	poll.Within(t, 15*time.Second, "the link's end recorded", func() bool {
		code, body := get(t, b.url+"/device/list", apiKey)
		return code == 200 && strings.Contains(string(body), `"online":false`)
	})
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil { // within the grace
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	if n := events("device.offline")["left-phone"]; n != 0 {
		t.Fatalf("reported offline %d times before the grace ran", n)
	}
	poll.Within(t, 30*time.Second, "device.offline for the phone whose node died in its grace", func() bool { return events("device.offline")["left-phone"] >= 1 })
}

// eventsCluster starts nodes a and b of one cluster (one PostgreSQL
// database, one NATS bus; b on a data directory of its own) with a
// device's offline grace of grace, and has the company's device.online
// and device.offline events pushed to a receiver: events(typ) counts them
// by device.
func eventsCluster(t *testing.T, grace string) (a, b *server, apiKey string, events func(typ string) map[string]int) {
	t.Helper()
	bin, db, st, apiKey, nats := clusterParts(t)
	rc := webhooktest.NewReceiver(t, false, nil)
	node := func(name string, st testStore) *server {
		return startServer(t, bin, st, "--node-name", name, "--nats-url", nats.ClientURL(), "--link-sweep", "300ms",
			"--webhook-allow-private", "--device-offline-grace", grace, "--node-live-window", testLiveWindow)
	}
	a = node("a", st)
	b = node("b", testStore{dir: t.TempDir(), databaseURL: db})
	if code, body := call(t, "PUT", b.url+"/webhooks/inbound-sms", apiKey, map[string]any{"webhooks": []map[string]any{{"url": rc.URL + "/events", "events": []string{"device.online", "device.offline"}}}}); code != 200 {
		t.Fatalf("PUT /webhooks/inbound-sms: %d %v", code, body)
	}
	return a, b, apiKey, func(typ string) map[string]int { return deviceEvents(rc, typ) }
}

// clusterTest runs a cluster test in parallel, once: a cluster is on
// PostgreSQL whatever the pass, so it runs in the first pass of make test
// only, and it builds and runs the binary, so not under -short.
func clusterTest(t *testing.T) {
	t.Helper()
	if storetest.Postgres() {
		t.Skip("a cluster is on PostgreSQL whatever the pass: this test runs once, in the first pass of make test")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
}

// clusterParts builds the binary and makes what the nodes of a cluster test
// share: a database with a company (its API key), the first node's store
// and a bus.
func clusterParts(t *testing.T) (bin, db string, st testStore, apiKey string, nats *natsd.Server) {
	t.Helper()
	bin = buildBinary(t)
	db = pgtest.URL(t)
	st = testStore{dir: t.TempDir(), databaseURL: db}
	apiKey = createCompany(t, bin, st)
	nats = natstest.New(t)
	t.Cleanup(nats.Shutdown)
	return bin, db, st, apiKey, nats
}
