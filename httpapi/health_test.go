package httpapi_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

func intp(v int) *int    { return &v }
func boolp(v bool) *bool { return &v }

// healthPhone is a reference-client phone whose hello carries health (nil:
// none, as a phone of revision 1.4 sends it); the error frames it gets
// come on errs.
func (e *env) healthPhone(reg client.Registration, health *proto.Health) (*client.Phone, chan proto.Error) {
	e.t.Helper()
	errs := make(chan proto.Error, 16)
	p := client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello:       proto.Hello{AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1"}}, Health: health},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnError: func(f proto.Error) { errs <- f },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	e.eventually("the phone connects", p.Connected)
	return p, errs
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

	p, errs := e.healthPhone(e.pairPhone(a.apiKey, "healthy"), &proto.Health{
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
	f := nextError(t, errs)
	if f.Code != "rate_limited" || f.RetryAfter != proto.HealthIntervalSeconds || !strings.HasPrefix(f.Message, "health: ") {
		t.Errorf("early report: got %+v, want rate_limited, retry_after %d, message starting \"health: \"", f, proto.HealthIntervalSeconds)
	}
	if got := e.deviceHealth(a.apiKey, "healthy"); !reflect.DeepEqual(got, want) {
		t.Errorf("after a refused report:\n got %v\nwant %v", got, want)
	}

	// A bad report is refused by field; the link stays up.
	p.Health(proto.Health{Battery: intp(101)})
	if f := nextError(t, errs); f.Code != "validation_failed" || f.Field != "battery" || !strings.HasPrefix(f.Message, "health: ") {
		t.Errorf("battery 101: got %+v, want validation_failed on battery", f)
	}
	p.Health(proto.Health{Network: strings.Repeat("x", proto.MaxNetworkBytes+1)})
	if f := nextError(t, errs); f.Code != "validation_failed" || f.Field != "network" {
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
