package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// A device card shows the phone's last health report, with a badge while
// its battery is low; a phone that reports none reads "not reported". The
// webhook editor offers the device events.
func TestDeviceCardsShowHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-quiet", false)
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: e.pairingCode(key), DeviceFingerprint: "fp-health", DeviceName: "Phone fp-health", AppVersion: "1.5.0",
	})
	if err != nil {
		t.Fatal(err)
	}
	battery, charging, signal := 12, true, 75
	ph := e.runPhone(reg, proto.Hello{AppVersion: "1.5.0", SIMs: []proto.SIM{{Slot: "SIM1"}}, Health: &proto.Health{
		Battery: &battery, Charging: &charging, Signal: &signal, Network: "lte",
		SIMs: []proto.SIMHealth{{Slot: "SIM1", Operator: "Acme <Mobile>"}},
	}}, false)

	// Two SMS wait for a registered phone that never linked.
	if _, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: e.pairingCode(key), DeviceFingerprint: "fp-away", DeviceName: "Phone fp-away", AppVersion: "1.5.0",
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, text := range []string{"one", "two"} {
		if p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-away"}, "phone": {"+15550100000"}, "message": {text}, "sim_slot": {"SIM1"}}); p.status != http.StatusOK {
			t.Fatalf("send: %d %s", p.status, p.body)
		}
	}
	// The linked phone fails a send: its card names the failure.
	p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-health"}, "phone": {"+15550100000"}, "message": {"doomed"}, "sim_slot": {"SIM1"}})
	m := regexp.MustCompile(`"queue_id":"([^"]+)"`).FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	poll.Until(t, "the phone takes the send", func() bool { return ph.Journaled(m[1]) })
	ph.Report(m[1], proto.StatusFailed, "no_service")
	poll.Until(t, "the failure is stored", func() bool { return ph.Pending() == 0 })
	body := b.get("/console/devices").body
	card := func(fp string) string {
		i := strings.Index(body, `id="device-`+fp+`"`)
		if i < 0 {
			t.Fatalf("no card of %s in\n%s", fp, body)
		}
		rest := body[i:]
		if j := strings.Index(rest, "</li>"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	healthy := card("fp-health")
	for _, want := range []string{
		"<dd data-health>battery 12 %, charging; signal 75 %; <bdi>lte</bdi>; SIM1: <bdi>Acme &lt;Mobile&gt;</bdi> ",
		"<span class=\"badge off\" data-battery-low>battery low</span>",
	} {
		if !strings.Contains(healthy, want) {
			t.Errorf("fp-health's card: want %q in\n%s", want, healthy)
		}
	}
	if away := card("fp-away"); !strings.Contains(away, "<dd data-queue>2 SMS waiting for the phone</dd>") {
		t.Errorf("fp-away's card: want 2 SMS waiting in\n%s", away)
	}
	if !strings.Contains(healthy, "<dd data-queue>none</dd>") || !regexp.MustCompile(`<dd data-failures><time datetime="[^"]+">[^<]+</time> failed \(<bdi>no_service</bdi>\)</dd>`).MatchString(healthy) {
		t.Errorf("fp-health's card: want none waiting and its failure in\n%s", healthy)
	}
	if away := card("fp-away"); !strings.Contains(away, "<dd data-failures>none</dd>") {
		t.Errorf("fp-away's card: want no failures in\n%s", away)
	}
	quiet := card("fp-quiet")
	if !strings.Contains(quiet, "<dd data-health>not reported</dd>") || strings.Contains(quiet, "battery low") {
		t.Errorf("fp-quiet's card: want health not reported and no badge in\n%s", quiet)
	}

	state := b.get("/console/devices/state").body
	if !strings.Contains(state, `"health":{"battery":12,"charging":true,"signal":75,"network":"lte","sims":[{"slot":"SIM1","operator":"Acme \u003cMobile\u003e"}],"battery_low":true,`) ||
		!strings.Contains(state, `"health":null`) {
		t.Errorf("devices/state: want both devices' health in\n%s", state)
	}
	// The queue depths and failures are the cards' alone: the state (the
	// badges, the pairing panel) neither reads nor answers them
	// (TestConsoleReadsQueueDepthsOnlyWhereShown).
	if strings.Contains(state, `"last_failures"`) || strings.Contains(state, `"queue_depth"`) {
		t.Errorf("devices/state: want no queue depths nor failures in\n%s", state)
	}
	if strings.Contains(state, `"last_seen":"0001-01-01`) {
		t.Errorf("devices/state: a phone never seen has no last_seen, not year 1, in\n%s", state)
	}

	hooks := b.get("/console/webhooks").body
	for _, ev := range []string{"device.online", "device.offline", "device.battery_low"} {
		if !strings.Contains(hooks, `value="`+ev+`"`) {
			t.Errorf("the webhook editor offers no %s box", ev)
		}
	}
}
