package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/waitpar"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// rig is a hub over a real store, with the real device and SMS services,
// served on loopback.
type rig struct {
	t       testing.TB
	hub     *Hub
	store   store.Backend
	devices *device.Service
	sms     *sms.Service
	url     string // ws://127.0.0.1:PORT
	company uint64
	admin   uint64          // the company's admin user
	logs    *syncbuf.Buffer // the hub's log
	reads   *atomic.Int64   // the hub's reads of the SMS queue (Intake.Pending)
	// beforeRead, when set, runs before each of the hub's reads of the SMS
	// queue, on the reading goroutine.
	beforeRead *atomic.Pointer[func()]
	holds      atomic.Int64 // commits held so far (holdCommitsOf)
}

// countedIntake is the SMS service as the hub's intake, counting the hub's
// reads of the queue (and running rig.beforeRead before each).
type countedIntake struct {
	*sms.Service
	reads  *atomic.Int64
	before *atomic.Pointer[func()]
}

func (c countedIntake) Pending(ctx context.Context, dev store.Device, after uint64, limit int) ([]sms.Job, error) {
	c.reads.Add(1)
	if f := c.before.Load(); f != nil {
		(*f)()
	}
	return c.Service.Pending(ctx, dev, after, limit)
}

// serverClosed waits for the hub's record that it closed the device's link
// with code: what the server decided, whether or not a phone that never
// reads gets to see the close frame.
func (r *rig) serverClosed(device string, code int) {
	r.t.Helper()
	want := fmt.Sprintf("device=%s code=%d ", device, code)
	eventually(r.t, "the hub's log of the close", func() bool { return strings.Contains(r.logs.String(), want) })
}

func newRig(t testing.TB, cfg Config) *rig { return newRigAt(t, cfg, time.Now) }

// newRigAt is newRig whose SMS service reads the time from now.
func newRigAt(t testing.TB, cfg Config, now func() time.Time) *rig {
	t.Helper()
	// The hub's tests are about the link, not about what survives a power
	// cut (cmd/simrelay's crash tests are): the store skips each commit's
	// fsync, which on a busy disk was most of a drain's time.
	return newRigStore(t, cfg, now, storetest.Options{})
}

// newRigStore is newRigAt over a store opened with opt.
func newRigStore(t testing.TB, cfg Config, now func() time.Time, opt storetest.Options) *rig {
	t.Helper()
	return newRigServed(t, cfg, now, opt, nil)
}

// newRigServed is newRigStore served through wrap's listener (nil: the
// loopback listener as it is).
func newRigServed(t testing.TB, cfg Config, now func() time.Time, opt storetest.Options, wrap func(net.Listener) net.Listener) *rig {
	t.Helper()
	return newRigOn(t, storetest.OpenWith(t, opt), cfg, now, wrap)
}

// newRigOn is newRigServed on the store st.
func newRigOn(t testing.TB, st store.Backend, cfg Config, now func() time.Time, wrap func(net.Listener) net.Listener) *rig {
	t.Helper()
	return newRigHub(t, st, cfg, now, wrap, hubSetup{})
}

// hubSetup changes the hub of a rig from newRigOn's.
type hubSetup struct {
	now     func() time.Time              // the hub's clock; nil: time.Now
	devices func(*device.Service) Devices // the device service as the hub reaches it; nil: as it is
	intake  func(Intake) Intake           // the intake as the hub reaches it; nil: as it is
	epochs  Epochs                        // the cluster's fencing of links; nil: none (one node)
	wire    func(*Hub, *slog.Logger)      // wires more into the hub before it serves (SetAgents); nil: nothing
}

// newRigHub is newRigOn with the hub set up as setup says.
func newRigHub(t testing.TB, st store.Backend, cfg Config, now func() time.Time, wrap func(net.Listener) net.Listener, setup hubSetup) *rig {
	t.Helper()
	c := store.Company{Name: "Acme", APIKeyHash: []byte("k")}
	admin := store.User{Email: "a@acme.test", PasswordHash: "x"}
	if err := st.CreateCompany(&c, &admin); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	devices := device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now)
	messages := sms.New(sms.Config{}, st, log, now)
	reads, before := new(atomic.Int64), new(atomic.Pointer[func()])
	var hubDevices Devices = devices
	if setup.devices != nil {
		hubDevices = setup.devices(devices)
	}
	if setup.now == nil {
		setup.now = time.Now
	}
	var intake Intake = countedIntake{messages, reads, before}
	if setup.intake != nil {
		intake = setup.intake(intake)
	}
	hub := New(cfg, hubDevices, intake, log, setup.now)
	if setup.epochs != nil {
		hub.SetEpochs(setup.epochs)
	}
	if setup.wire != nil {
		setup.wire(hub, log)
	}
	messages.SetDispatcher(hub)
	srv := httptest.NewUnstartedServer(hub)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	r := &rig{t: t, hub: hub, store: st, devices: devices, sms: messages, url: "ws" + strings.TrimPrefix(srv.URL, "http"), company: c.ID, admin: admin.ID, logs: logs, reads: reads, beforeRead: before}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
		srv.Close()
	})
	return r
}

// pair registers a device through the real pairing flow and returns its token.
func (r *rig) pair(fingerprint string) string {
	r.t.Helper()
	ctx := context.Background()
	p, err := r.devices.CreatePairing(ctx, r.company, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	reg, err := r.devices.Register(ctx, device.RegisterInput{PairingCode: p.Code, DeviceFingerprint: fingerprint,
		SIMs: []store.SIM{{Slot: "SIM1"}, {Slot: "SIM2"}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return reg.Token
}

// dial opens a raw WebSocket with the token; opts may change the HTTP client.
func (r *rig) dial(token string, hc *http.Client) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return websocket.Dial(ctx, r.url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
}

// connect dials, says hello and reads the welcome.
func (r *rig) connect(token string) *websocket.Conn {
	r.t.Helper()
	return r.connectHearingPings(token, nil)
}

// connectHearingPings is connect for a phone that calls onPing on each
// ping the server sends, and answers it with a pong unless onPing says
// false (nil: it answers every ping).
func (r *rig) connectHearingPings(token string, onPing func(context.Context, []byte) bool) *websocket.Conn {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	ws, _, err := websocket.Dial(ctx, r.url, &websocket.DialOptions{
		HTTPHeader:     http.Header{"Authorization": {"Bearer " + token}},
		OnPingReceived: onPing,
	})
	cancel()
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { ws.CloseNow() })
	writeFrame(r.t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if w, ok := readFrame(r.t, ws).(*proto.Welcome); !ok || w.DeviceFingerprint == "" {
		r.t.Fatalf("got %#v, want a welcome", w)
	}
	return ws
}

func writeFrame(t testing.TB, ws *websocket.Conn, f proto.Frame) {
	t.Helper()
	data, err := proto.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, ws, data)
}

func writeRaw(t testing.TB, ws *websocket.Conn, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one frame with a deadline (coder/websocket closes the link
// when a read's context ends, which is fine in a test that failed anyway).
func readFrame(t testing.TB, ws *websocket.Conn) proto.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	f, err := proto.Decode(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return f
}

// closeCode reads until the link closes and returns the close code, failing
// the test when frames other than error frames arrive first.
func closeCode(t *testing.T, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	return readToClose(t, ws, func(data []byte) bool {
		f, _ := proto.Decode(data)
		return f != nil && f.FrameType() == proto.TypeError
	})
}

// closeAfterBacklog reads whatever frames are queued and returns the close code.
func closeAfterBacklog(t *testing.T, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	return readToClose(t, ws, func([]byte) bool { return true })
}

// readToClose reads frames, each of which must pass ok, until the link
// closes, and returns the close code.
func readToClose(t *testing.T, ws *websocket.Conn, ok func(data []byte) bool) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			t.Fatalf("the link ended without a close frame: %v", err)
		}
		if !ok(data) {
			t.Fatalf("got %s before the close, want only error frames", data)
		}
	}
}

// eventually waits, with a deadline, for cond.
var eventually = poll.Until

func apiError(t *testing.T, res *http.Response) string {
	t.Helper()
	var body struct{ Error, Message string }
	if res == nil || json.NewDecoder(res.Body).Decode(&body) != nil {
		t.Fatalf("no JSON error body")
	}
	return body.Error
}

// tinyReceiveBuffer is an HTTP client whose sockets have a small receive
// buffer, so that a phone that stops reading backs up the server quickly.
func tinyReceiveBuffer() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		if err != nil {
			return err
		}
		return serr
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// tinySendBuffer is a link's socket send buffer (Config.SendBuffer) for
// tests whose phone stops reading: what the server's kernel holds for it,
// ahead of the hub's own queue, is then a few KB (Linux doubles it), and a
// frame larger than that stalls the link's writer (stallWriter). At the
// default (DefaultSendBuffer, 256 KiB in the kernel) the phone would read
// that much first; left to the kernel's autotuning, as before the hub set
// it, the backlog behind a phone that read nothing grew to 2.2 MB, some
// 24,000 small frames, that a test then had to read before the close frame.
const tinySendBuffer = 4096

func devicePatchStatus(status string) device.Patch { return device.Patch{Status: &status} }

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore),
// and runs two tests a core at once (waitpar): many tests here wait out a
// close handshake with a phone that does not read, or a ping, pong or
// write deadline, with the cores idle.
func TestMain(m *testing.M) {
	waitpar.Default(2)
	storetest.Main(m)
}

// id is the device id of the fingerprint's device: the live one of the
// rig's company, or else (deleted) that of its link here.
func (r *rig) id(fingerprint string) uint64 {
	r.t.Helper()
	if d, err := r.devices.Get(context.Background(), r.company, fingerprint); err == nil {
		return d.ID
	}
	if c := r.hub.lookup(fingerprint); c != nil {
		return c.dev.ID
	}
	r.t.Fatalf("no device %q", fingerprint)
	return 0
}

// ids is the fingerprints with their device ids (id), for Presence; an
// unknown fingerprint gets none.
func (r *rig) ids(fingerprints ...string) map[string]uint64 {
	out := make(map[string]uint64, len(fingerprints))
	for _, fp := range fingerprints {
		if d, err := r.devices.Get(context.Background(), r.company, fp); err == nil {
			out[fp] = d.ID
		} else if c := r.hub.lookup(fp); c != nil {
			out[fp] = c.dev.ID
		} else {
			out[fp] = 0
		}
	}
	return out
}
