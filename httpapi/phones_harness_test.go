package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// pairPhone makes a pairing code with the token (API key or access token)
// and registers a device with it through the API, as a phone would.
func (e *env) pairPhone(token, fingerprint string) client.Registration {
	e.t.Helper()
	return e.pairPhoneSIMs(token, fingerprint, []proto.SIM{{Slot: "SIM1", Carrier: "Acme Mobile", PhoneNumber: "+15550109001"}, {Slot: "SIM2"}})
}

// pairPhoneSIMs is pairPhone for a phone that announces sims (nil: none).
func (e *env) pairPhoneSIMs(token, fingerprint string, sims []proto.SIM) client.Registration {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/device/pairing", token: token})
	e.want(r, http.StatusCreated, "")
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: r.str("pairing_code"), DeviceFingerprint: fingerprint, DeviceName: "Phone " + fingerprint,
		SIMs: sims, AppVersion: "test",
	})
	if err != nil {
		e.t.Fatalf("register %s: %v", fingerprint, err)
	}
	if !strings.HasPrefix(reg.WSURL, "ws://") {
		e.t.Fatalf("ws_url %q", reg.WSURL)
	}
	return reg
}

// vphone is a reference-client phone running against the server.
type vphone struct {
	*client.Phone
	mu     sync.Mutex
	jobs   []proto.Send
	stop   context.CancelFunc
	done   chan error
	states chan bool
}

// runPhone connects a virtual phone and waits for its first welcome. Jobs
// are collected; with autoReport each job is reported sent, then delivered.
func (e *env) runPhone(reg client.Registration, selectedSIM string, autoReport bool) *vphone {
	e.t.Helper()
	vp := &vphone{done: make(chan error, 1), states: make(chan bool, 64)}
	vp.Phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello:       proto.Hello{AppVersion: "test", SelectedSIM: selectedSIM, SIMs: []proto.SIM{{Slot: "SIM1"}, {Slot: "SIM2"}}},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			vp.mu.Lock()
			vp.jobs = append(vp.jobs, s)
			vp.mu.Unlock()
			if autoReport {
				go func() {
					vp.Report(s.ID, proto.StatusSent, "")
					vp.Report(s.ID, proto.StatusDelivered, "")
				}()
			}
		},
		OnState: func(up bool, _ error) {
			select {
			case vp.states <- up:
			default:
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	vp.stop = cancel
	go func() { vp.done <- vp.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-vp.done })
	e.eventually("the phone connects", vp.Connected)
	return vp
}

// Jobs returns the jobs received so far.
func (vp *vphone) Jobs() []proto.Send {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	return append([]proto.Send(nil), vp.jobs...)
}

// eventually waits, with a deadline, for cond.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	poll.Until(e.t, what, cond)
}

// wsURL is the server's WebSocket address.
func (e *env) wsURL() string { return "ws" + strings.TrimPrefix(e.url, "http") + "/device/ws" }
