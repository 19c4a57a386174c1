package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

func intp(v int) *int    { return &v }
func boolp(v bool) *bool { return &v }

// healthPhone is a reference-client phone whose hello carries health (nil:
// none, as a phone of revision 1.4 sends it), connected; the error frames
// it gets come on errs, and each link up adds one to ups.
type healthPhone struct {
	*client.Phone
	errs chan proto.Error
	ups  atomic.Int32
	stop func()
}

func (e *env) healthPhone(reg client.Registration, health *proto.Health) *healthPhone {
	e.t.Helper()
	hp := &healthPhone{errs: make(chan proto.Error, 16)}
	hp.Phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello:       proto.Hello{AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1"}}, Health: health},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnError: func(f proto.Error) { hp.errs <- f },
		OnState: func(up bool, _ error) {
			if up {
				hp.ups.Add(1)
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hp.Run(ctx) }()
	hp.stop = sync.OnceFunc(func() { cancel(); <-done })
	e.t.Cleanup(hp.stop)
	e.eventually("the phone connects", hp.Connected)
	return hp
}

// nextError waits for the phone's next error frame.
func nextError(t *testing.T, errs chan proto.Error) proto.Error {
	t.Helper()
	select {
	case f := <-errs:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no error frame within 10s")
		return proto.Error{}
	}
}

// deviceHealth is the health object of a device in GET /device/list.
func (e *env) deviceHealth(token, fingerprint string) any {
	e.t.Helper()
	d, ok := e.phonesList(token)[fingerprint]
	if !ok {
		e.t.Fatalf("/device/list has no %s", fingerprint)
	}
	h, ok := d["health"]
	if !ok {
		e.t.Fatalf("%s: /device/list item without health", fingerprint)
	}
	return h
}

// A phone's hello and its health frames reach the device list; a phone of
// an older revision, whose hello has no health, links as before.
func TestDeviceHealthReachesList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")

	old := e.runPhone(e.pairPhone(a.apiKey, "old-phone"), "SIM1", false)
	if !old.Connected() {
		t.Fatal("a hello without health did not link")
	}
	if h := e.deviceHealth(a.apiKey, "old-phone"); h != nil {
		t.Errorf("old-phone: got health %v, want null", h)
	}

	p := e.healthPhone(e.pairPhone(a.apiKey, "healthy"), &proto.Health{
		Battery: intp(87), Charging: boolp(true), Signal: intp(50), Network: "nr",
		SIMs: []proto.SIMHealth{{Slot: "SIM1", Operator: "Acme Mobile"}},
	})
	want := map[string]any{
		"battery": 87.0, "charging": true, "signal": 50.0, "network": "nr",
		"sims":        []any{map[string]any{"slot": "SIM1", "operator": "Acme Mobile"}},
		"battery_low": false, "reported_at": e.clock.Now().UTC().Format(contractTime),
	}
	if got := e.deviceHealth(a.apiKey, "healthy"); !reflect.DeepEqual(got, want) {
		t.Errorf("health from hello:\n got %v\nwant %v", got, want)
	}

	// A report within the interval is refused with the wait, and not stored.
	p.Health(proto.Health{Battery: intp(80)})
	f := nextError(t, p.errs)
	if f.Code != "rate_limited" || f.RetryAfter != proto.HealthIntervalSeconds || !strings.HasPrefix(f.Message, "health: ") {
		t.Errorf("early report: got %+v, want rate_limited, retry_after %d, message starting \"health: \"", f, proto.HealthIntervalSeconds)
	}
	if got := e.deviceHealth(a.apiKey, "healthy"); !reflect.DeepEqual(got, want) {
		t.Errorf("after a refused report:\n got %v\nwant %v", got, want)
	}

	// A bad report is refused by field; the link stays up.
	p.Health(proto.Health{Battery: intp(101)})
	if f := nextError(t, p.errs); f.Code != "validation_failed" || f.Field != "battery" || !strings.HasPrefix(f.Message, "health: ") {
		t.Errorf("battery 101: got %+v, want validation_failed on battery", f)
	}
	p.Health(proto.Health{Network: strings.Repeat("x", proto.MaxNetworkBytes+1)})
	if f := nextError(t, p.errs); f.Code != "validation_failed" || f.Field != "network" {
		t.Errorf("long network: got %+v, want validation_failed on network", f)
	}

	// After the interval a report replaces the last one; fields it leaves out are unknown.
	e.clock.Advance(proto.HealthIntervalSeconds * time.Second)
	p.Health(proto.Health{Battery: intp(12), Network: "wifi"})
	want2 := map[string]any{
		"battery": 12.0, "charging": nil, "signal": nil, "network": "wifi", "sims": []any{},
		"battery_low": true, "reported_at": e.clock.Now().UTC().Format(contractTime),
	}
	e.eventually("the health frame reaches the list", func() bool {
		return reflect.DeepEqual(e.deviceHealth(a.apiKey, "healthy"), want2)
	})
	if !p.Connected() {
		t.Error("the link went down over health reports")
	}

	// Another company sees none of it.
	r := e.do(call{method: "GET", path: "/device/list", token: b.apiKey})
	e.want(r, http.StatusOK, "")
	if strings.Contains(string(r.Raw), "healthy") {
		t.Errorf("company B sees company A's device: %s", r.Raw)
	}
}

// A hello whose health is invalid is refused like any invalid hello field.
func TestDeviceHealthInvalidHello(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "bad-health")
	for _, tc := range []struct {
		health proto.Health
		field  string
	}{
		{proto.Health{Battery: intp(-1)}, "hello.health.battery"},
		{proto.Health{Signal: intp(101)}, "hello.health.signal"},
		{proto.Health{Network: "LTE"}, "hello.health.network"},
		{proto.Health{SIMs: []proto.SIMHealth{{Slot: "SIM3"}}}, "hello.health.sims[0].slot"},
		{proto.Health{SIMs: []proto.SIMHealth{{Slot: "SIM1", Operator: strings.Repeat("é", 33)}}}, "hello.health.sims[0].operator"},
	} {
		ws, _, err := e.phonesDial(reg.DeviceToken)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := proto.Encode(proto.Hello{Protocol: proto.Version, Health: &tc.health})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			t.Fatal(err)
		}
		_, reply, err := ws.Read(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: no error frame: %v", tc.field, err)
		}
		f, _ := proto.Decode(reply)
		if ef, ok := f.(*proto.Error); !ok || ef.Code != "invalid_hello" || !strings.HasPrefix(ef.Message, tc.field+" ") {
			t.Errorf("%s: got %s, want invalid_hello naming the field", tc.field, reply)
		}
		ws.CloseNow()
	}
	if h := e.deviceHealth(a.apiKey, "bad-health"); h != nil {
		t.Errorf("got health %v after refused hellos, want null", h)
	}
}

// devEvents counts the device.* deliveries a receiver got, by type, and
// returns the data of the newest of each.
func devEvents(t *testing.T, rc *webhooktest.Receiver, path string) (map[string]int, map[string]map[string]any) {
	t.Helper()
	n, last, lastAt := map[string]int{}, map[string]map[string]any{}, map[string]time.Time{}
	for _, r := range rc.Requests() {
		if r.Path != path {
			continue
		}
		var body struct {
			Type      string         `json:"type"`
			CreatedAt time.Time      `json:"created_at"`
			Data      map[string]any `json:"data"`
		}
		mustJSON(t, r.Body, &body)
		if r.Header.Get("X-Service-Event") != body.Type {
			t.Errorf("X-Service-Event %q for a %s event", r.Header.Get("X-Service-Event"), body.Type)
		}
		n[body.Type]++
		// Deliveries run side by side and may arrive out of order
		// (docs/webhooks.md): the newest is the one created last.
		if !body.CreatedAt.Before(lastAt[body.Type]) {
			last[body.Type], lastAt[body.Type] = body.Data, body.CreatedAt
		}
	}
	return n, last
}

// offlineMails are the offline mails the inbox got for the address.
func (e *env) offlineMails(to string) []mailtest.Received {
	var out []mailtest.Received
	for _, m := range e.inbox.Messages() {
		if strings.Contains(m.Subject, "is offline") && slices.Contains(m.To, to) {
			out = append(out, m)
		}
	}
	return out
}

// Health and the link reach the company's webhooks as opt-in device events:
// online, offline after the grace (a reconnect within it is no event),
// battery_low once per crossing; and the admins get one offline mail per
// device an hour at most.
func TestDeviceEventsAndOfflineMail(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	all := []any{"device.online", "device.offline", "device.battery_low"}
	e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/a", "events": all}, map[string]any{"url": rc.URL + "/inbound-only"})
	e.whPut(b.apiKey, map[string]any{"url": rc.URL + "/b", "events": all})
	want := map[string]int{}
	wantEvents := func(what string) map[string]map[string]any {
		t.Helper()
		var last map[string]map[string]any
		e.eventually(what, func() bool {
			var n map[string]int
			n, last = devEvents(t, rc, "/a")
			return reflect.DeepEqual(n, want)
		})
		return last
	}

	reg := e.pairPhone(a.apiKey, "events-phone")
	p := e.healthPhone(reg, &proto.Health{Battery: intp(50), Charging: boolp(false), Network: "lte"})
	want["device.online"] = 1
	last := wantEvents("device.online")
	if d := last["device.online"]; d["device_fingerprint"] != "events-phone" || d["device_name"] != "Phone events-phone" || d["online"] != true ||
		d["battery"] != 50.0 || d["charging"] != false || d["network"] != "lte" || d["signal"] != nil {
		t.Errorf("device.online data: got %v", d)
	}

	// A reconnect within the grace is no event.
	e.hub.Disconnect("events-phone", linkedID(e.hub, "events-phone"), proto.CloseRestarting, "server restarting")
	e.eventually("the phone reconnects", func() bool { return p.ups.Load() == 2 && linked(e.hub, "events-phone") })

	// battery_low once per crossing of 15 %.
	for _, level := range []int{10, 9, 40, 5} {
		e.clock.Advance(proto.HealthIntervalSeconds * time.Second)
		p.Health(proto.Health{Battery: intp(level)})
		e.eventually("the report is stored", func() bool {
			h, _ := e.deviceHealth(a.apiKey, "events-phone").(map[string]any)
			return h["battery"] == float64(level)
		})
	}
	want["device.battery_low"] = 2
	last = wantEvents("two device.battery_low")
	if d := last["device.battery_low"]; d["battery"] != 5.0 || d["online"] != true {
		t.Errorf("device.battery_low data: got %v", d)
	}

	// Gone for longer than the grace: offline, and one mail to the admin.
	p.stop()
	want["device.offline"] = 1
	last = wantEvents("device.offline")
	if d := last["device.offline"]; d["online"] != false || d["device_fingerprint"] != "events-phone" {
		t.Errorf("device.offline data: got %v", d)
	}
	e.eventually("the offline mail", func() bool { return len(e.offlineMails("owner@acme.test")) == 1 })
	m := e.offlineMails("owner@acme.test")[0]
	if !strings.Contains(m.Subject, "Phone events-phone") || !strings.Contains(m.Text, e.url+"/console/devices") {
		t.Errorf("offline mail: subject %q, text:\n%s", m.Subject, m.Text)
	}

	// Back and gone again within the hour: the events, but no second mail.
	p = e.healthPhone(reg, nil)
	want["device.online"] = 2
	wantEvents("device.online again")
	p.stop()
	want["device.offline"] = 2
	wantEvents("device.offline again")

	// An hour later the next offline mails again.
	e.clock.Advance(time.Hour)
	p = e.healthPhone(reg, nil)
	want["device.online"] = 3
	wantEvents("device.online a third time")
	p.stop()
	want["device.offline"] = 3
	wantEvents("device.offline a third time")
	e.eventually("the second offline mail", func() bool { return len(e.offlineMails("owner@acme.test")) >= 2 })
	if n := len(e.offlineMails("owner@acme.test")); n != 2 {
		t.Errorf("got %d offline mails for three offline spells within two hours, want 2", n)
	}

	// The entry without an events list and the other company get none of it.
	if n, _ := devEvents(t, rc, "/inbound-only"); len(n) != 0 {
		t.Errorf("an entry without events got device events: %v", n)
	}
	if n, _ := devEvents(t, rc, "/b"); len(n) != 0 {
		t.Errorf("company B got company A's device events: %v", n)
	}
	if n := len(e.offlineMails("owner@other.test")); n != 0 {
		t.Errorf("company B's admin got %d offline mails", n)
	}
}

// The device list counts the SMS waiting for each phone (they leave the
// count once the phone takes them) and shows its last three failures,
// newest first.
func TestDeviceListQueueAndFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "away-phone")
	e.pairPhone(a.apiKey, "idle-phone")
	var ids []string
	for i := range 4 {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("away-phone", "+15557654321", fmt.Sprintf("waiting %d", i), "SIM1")})
		e.want(r, http.StatusOK, "")
		ids = append(ids, r.str("queueId"))
	}
	list := e.phonesList(a.apiKey)
	if list["away-phone"]["queue_depth"] != 4.0 || list["idle-phone"]["queue_depth"] != 0.0 {
		t.Errorf("got queue_depth %v and %v, want 4 and 0", list["away-phone"]["queue_depth"], list["idle-phone"]["queue_depth"])
	}
	if f, ok := list["away-phone"]["last_failures"].([]any); !ok || len(f) != 0 {
		t.Errorf("got last_failures %v before any failure, want []", list["away-phone"]["last_failures"])
	}

	vp := e.runPhone(reg, "BOTH", false)
	e.eventually("the phone takes its queue", func() bool { return len(vp.Jobs()) == 4 })
	e.eventually("the queue is empty", func() bool { return e.phonesList(a.apiKey)["away-phone"]["queue_depth"] == 0.0 })
	codes := []string{"generic_failure", "no_service", "radio_off", "null_pdu"}
	for i, id := range ids {
		vp.Report(id, proto.StatusFailed, codes[i])
		e.eventually("the failure is stored", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "failed" })
	}
	var got []string
	for _, f := range e.phonesList(a.apiKey)["away-phone"]["last_failures"].([]any) {
		m := f.(map[string]any)
		if m["status"] != "failed" || m["channel"] != "sms" || m["at"] != e.clock.Now().UTC().Format(contractTime) {
			t.Errorf("failure %v", m)
		}
		got = append(got, fmt.Sprint(m["queue_id"], " ", m["error"]))
	}
	want := []string{ids[3] + " null_pdu", ids[2] + " radio_off", ids[1] + " no_service"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("last_failures:\n got %v\nwant %v", got, want)
	}
}
