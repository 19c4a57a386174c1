package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/stripemock"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

// env is one running server: a real store file, a real SMTP inbox and real HTTP.
type env struct {
	t   testing.TB
	url string
	// handler is the API's handler that url serves, for benchmarks that
	// drive it in-process, without a connection.
	handler http.Handler
	// api is the server that handler is of.
	api   *httpapi.Server
	store store.Backend
	inbox *mailtest.Inbox
	clock *testclock.Clock
	hub   *gateway.Hub
	// phones is the hub as the API holds it, counting its questions.
	phones *askedPhones
	sms    *sms.Service
	// agents is WhatsApp and iMessage; its gap's jitter comes from a seeded source.
	agents *channel.Service
	// webhooks runs on the real clock (retries must come due) until
	// stopWebhooks, which the test may call early to "restart" it.
	webhooks     *webhook.Service
	stopWebhooks func()
	// uploads is the media service's spool: an upload under way has a file
	// there from after it took its company's place (and a server slot)
	// until it ends.
	uploads string
}

// testMediaMax is the media cap of the tests' servers: small, so that a
// test of the cap sends no big body.
const testMediaMax = 256 << 10

type envOption func(*httpapi.Config)

// askedPhones is the hub as the API holds it, counting the Presence
// questions: on a cluster each is a query to the database for the devices
// linked on other nodes, so a list asks once for its page.
type askedPhones struct {
	*gateway.Hub
	presence atomic.Int64
	// hold, when set, stands for a store write that hangs: Disconnect
	// closes the link as the hub does, tells hold.called, and returns
	// hold.stored, which the test closes, instead of the hub's channel.
	hold atomic.Pointer[heldDisconnect]
}

// heldDisconnect is askedPhones.hold.
type heldDisconnect struct {
	called chan string // the fingerprint of each Disconnect, buffered
	stored chan struct{}
}

func (p *askedPhones) Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{} {
	done := p.Hub.Disconnect(fingerprint, deviceID, code, reason)
	if h := p.hold.Load(); h != nil {
		h.called <- fingerprint
		return h.stored
	}
	return done
}

func (p *askedPhones) Presence(devices map[string]uint64) map[string]time.Time {
	p.presence.Add(1)
	return p.Hub.Presence(devices)
}

// linked says whether the fingerprint has a live link on the hub, of
// whichever device.
func linked(h *gateway.Hub, fingerprint string) bool {
	_, ok := h.LinkDevice(fingerprint)
	return ok
}

// linkedID is the device id of the fingerprint's live link on the hub (0
// when none).
func linkedID(h *gateway.Hub, fingerprint string) uint64 {
	id, _ := h.LinkDevice(fingerprint)
	return id
}

// testHubConfig is the hub's configuration in tests: a short hello deadline.
var testHubConfig = gateway.Config{HelloTimeout: 2 * time.Second}

// testOfflineGrace is the devices' offline grace in tests: a reconnect of a
// test phone (tens of milliseconds) stays well inside it.
const testOfflineGrace = time.Second

// newEnv starts a server on loopback; everything stops with the test.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	return newWebhookEnv(t, webhook.Config{}, opts...)
}

// newWebhookEnv is newEnv with the webhook service's configuration.
func newWebhookEnv(t testing.TB, wcfg webhook.Config, opts ...envOption) *env {
	t.Helper()
	return newStoreEnv(t, storetest.Options{}, wcfg, opts...)
}

// newStoreEnv is newWebhookEnv with the store's options. The API's tests are
// about answers, not about what survives a power cut (cmd/simrelay's crash
// tests are), so they open their stores with BulkLoad: no fsync per commit,
// which on a busy disk was much of their time. The soak test keeps the fsync.
func newStoreEnv(t testing.TB, sopt storetest.Options, wcfg webhook.Config, opts ...envOption) *env {
	t.Helper()
	return newBillingEnv(t, sopt, wcfg, billing.Config{}, opts...)
}

// newBillingEnv is newStoreEnv with billing's configuration (self-hosted
// mode and the built-in plans by default).
func newBillingEnv(t testing.TB, sopt storetest.Options, wcfg webhook.Config, bcfg billing.Config, opts ...envOption) *env {
	t.Helper()
	return newEnvOn(t, storetest.OpenWith(t, sopt), wcfg, bcfg, opts...)
}

// newEnvOn is newBillingEnv on the store st (a test's wrapper of one
// storetest opened, which closes it), which every service reads.
func newEnvOn(t testing.TB, st store.Backend, wcfg webhook.Config, bcfg billing.Config, opts ...envOption) *env {
	t.Helper()
	inbox := mailtest.NewInbox(t)
	log := slog.New(slog.DiscardHandler)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))

	srv := httptest.NewUnstartedServer(nil)
	publicURL := "http://" + srv.Listener.Addr().String()
	mailer, err := mail.New(mail.Config{SMTPURL: inbox.URL(), PublicURL: publicURL}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mailer.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Cheap password hashes: the tests sign up and in often, and one hash at
	// the server's cost takes about a second of CPU under -race.
	accounts, err := account.New(account.Config{PublicURL: publicURL, PasswordTime: 1, PasswordMemory: 64}, st, mailer, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	// The companies their owners close are removed in the background, as
	// simrelay serve does.
	closings, stopClosings := context.WithCancel(context.Background())
	closed := make(chan struct{})
	go func() { defer close(closed); accounts.RunClosings(closings, time.Minute) }()
	t.Cleanup(func() { stopClosings(); <-closed })
	cfg := httpapi.Config{
		GeneralRate: pacing.Rate{Limit: 100, Window: time.Minute},
		AuthRate:    pacing.Rate{Limit: 15, Window: 15 * time.Minute},
		PublicURL:   publicURL,
	}
	for _, o := range opts {
		o(&cfg)
	}
	devices := device.New(device.Config{PublicURL: publicURL}, st, clk.Now)
	uploads := filepath.Join(t.TempDir(), "uploads")
	files, err := media.New(media.Config{PublicURL: publicURL, Key: []byte("media-url-key-of-the-tests-0123"), MaxBytes: testMediaMax, TempDir: uploads}, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if wcfg.MediaURLs == nil {
		wcfg.MediaURLs = files
	}
	hooks, err := webhook.New(wcfg, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan struct{})
	go func() { defer close(wdone); _ = hooks.Run(wctx) }()
	stopWebhooks := sync.OnceFunc(func() { wcancel(); <-wdone })
	t.Cleanup(stopWebhooks)
	st.SetStatusEvents(hooks.StatusEvents())
	st.SetInboundEvents(hooks.InboundEvents())
	st.SetDeviceEvents(hooks.DeviceEvents())
	messages := sms.New(sms.Config{}, st, log, clk.Now)
	hub := gateway.New(testHubConfig, devices, messages, log, clk.Now)
	messages.SetDispatcher(hub)
	if err := messages.SetFailoverHub(hub); err != nil {
		t.Fatal(err)
	}
	devices.SetAlerts(device.Alerts{Mailer: mailer, OfflineGrace: testOfflineGrace, DevicesURL: publicURL + web.Prefix + "/devices", Logger: log})
	presence := devices.NewPresence(hub.Online)
	hub.SetPresence(presence)
	agents, err := channel.New(channel.Config{}, st, log, clk.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	agents.SetDispatcher(hub)
	hub.SetAgents(agents)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
	})
	t.Cleanup(presence.Stop) // first: the links the hub's shutdown ends are no news
	bcfg.PublicURL = publicURL
	bill, err := billing.New(bcfg, st, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	st.SetPlans(bill)
	console, err := web.New(web.Config{PublicURL: publicURL}, web.Deps{Accounts: accounts, Devices: devices, SMS: messages,
		Webhooks: hooks, Billing: bill, Phones: hub, Analytics: st, Period: bill, Logger: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	phones := &askedPhones{Hub: hub}
	api, err := httpapi.New(cfg, httpapi.Deps{Accounts: accounts, Devices: devices, SMS: messages, Channels: agents, Phones: phones, PhoneSocket: hub, Store: st, Analytics: st, Period: bill, Billing: bill, Console: console.Handler(), ConsoleIdentity: console.Identity, Logger: log, Registry: reg, Gatherer: reg, Now: clk.Now, Webhooks: hooks, Media: files})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = api.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, handler: srv.Config.Handler, api: api, store: st, inbox: inbox, clock: clk, hub: hub, phones: phones, sms: messages, agents: agents, webhooks: hooks, stopWebhooks: stopWebhooks, uploads: uploads}
}

// resp is an answer with its decoded JSON body.
type resp struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// str returns a top-level string field of the body.
func (r resp) str(key string) string { s, _ := r.Body[key].(string); return s }

type call struct {
	method, path, token string
	body                any // marshalled as JSON; a string is sent as it is
	header              map[string]string
	multi               map[string][]string // headers given in several lines, one a value
}

func (e *env) do(c call) resp {
	e.t.Helper()
	var body io.Reader
	switch b := c.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(c.method, e.url+c.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	for k, vs := range c.multi {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := testhttp.Client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") && len(raw) > 0 && raw[0] != '[' {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			e.t.Fatalf("%s %s: body is not a JSON object: %v: %s", c.method, c.path, err, raw)
		}
	}
	return out
}

// want fails the test unless r has the status and, for errors, the code.
func (e *env) want(r resp, status int, code string) {
	e.t.Helper()
	if r.Status != status {
		e.t.Fatalf("got status %d, want %d; body %s", r.Status, status, r.Raw)
	}
	if code != "" && r.str("error") != code {
		e.t.Fatalf("got error %q, want %q; body %s", r.str("error"), code, r.Raw)
	}
	if status >= 400 && r.str("message") == "" {
		e.t.Fatalf("error body without a message: %s", r.Raw)
	}
}

// company is a signed-up, verified company with a logged-in admin.
type company struct {
	id, adminID    float64
	apiKey, access string
	refresh, email string
	password       string
}

const goodPassword = "Correct-Horse-9"

// newCompany signs up through the API, follows the e-mailed verification link,
// logs in and reads the API key.
func (e *env) newCompany(name, email string) company {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/auth/signup", body: map[string]any{
		"company": map[string]any{"name": name, "phone": "+1 555 010 0000", "country": "us"},
		"owner":   map[string]any{"firstName": "Ana", "lastName": "Admin", "email": email, "password": goodPassword},
	}})
	e.want(r, http.StatusCreated, "")
	msg := e.inbox.WaitFor(e.t, email, 10*time.Second)
	tok := mailtest.LinkToken(msg.Text, "/verify-email")
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": tok}}), http.StatusOK, "")
	c := company{id: r.Body["companyId"].(float64), adminID: r.Body["userId"].(float64), email: email, password: goodPassword}
	c.access, c.refresh = e.login(email, goodPassword)
	k := e.do(call{method: "GET", path: "/account/api-key", token: c.access})
	e.want(k, http.StatusOK, "")
	c.apiKey = k.str("apiKey")
	return c
}

func (e *env) login(email, password string) (access, refresh string) {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": password}})
	e.want(r, http.StatusOK, "")
	return r.str("accessToken"), r.str("refreshToken")
}

// storeFileSize is the size of the test's bbolt file; 0 on PostgreSQL.
func (e *env) storeFileSize() int64 {
	f, ok := e.store.(interface{ Path() string })
	if !ok {
		return 0
	}
	info, err := os.Stat(f.Path())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Size()
}

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore)
// and the stripe-mock the tests share (stripemock.Start).
func TestMain(m *testing.M) { os.Exit(stripemock.Run(m, storetest.Run)) }
