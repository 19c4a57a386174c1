package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

// env is the whole server on loopback: the API and the console on one
// handler, as simrelay serve wires them.
type env struct {
	t        *testing.T
	url      string
	store    store.Backend
	inbox    *mailtest.Inbox
	clock    *testclock.Clock
	accounts *account.Service
	broker   *web.Broker
	hub      *gateway.Hub
	told     *toldCount
	sms      *sms.Service
	agents   *channel.Service
	// stop takes the server down (the "server unreachable" case).
	stop func()
	// handler is the server's handler, for a test that serves it on a
	// server of its own settings too.
	handler http.Handler
	// console builds another console over the same store and services, as
	// another node of a cluster (or the server after a restart) has.
	console func() (*web.Console, error)
}

type envOptions struct {
	authRate    pacing.Rate
	generalRate pacing.Rate
	streams     web.StreamConfig
	// connState, when set, sees every connection's state changes.
	connState func(net.Conn, http.ConnState)
	// email is the e-mail to SMS listener the settings page tells of.
	email web.EmailToSMS
	// relayed, when set, gets the relay the PostgreSQL store is opened
	// through (storetest.Options.Relayed).
	relayed func(*pgtest.Relayed)
	// https gives the console an https public URL (a TLS proxy in front),
	// while the tests still reach it over plain http.
	https bool
	// phones, when set, is the hub as the console holds it.
	phones func(*gateway.Hub) web.Phones
	// wrap, when set, wraps the server's handler.
	wrap func(http.Handler) http.Handler
	// logs, when set, gets the server's log, debug lines too.
	logs io.Writer
	// plans, when set, replace the built-in plans (a --plans file).
	plans []billing.Plan
	// signupClosed closes public sign-up (serve --signup closed).
	signupClosed bool
	// timers are the console script's timers (web.Config.Timers).
	timers web.PageTimers
	// deviceStore, when set, wraps the store as the device service reads
	// it (a test that counts its reads).
	deviceStore func(device.Store) device.Store
}

func newEnv(t *testing.T, opts ...func(*envOptions)) *env {
	t.Helper()
	o := envOptions{authRate: pacing.Rate{Limit: 1000, Window: 15 * time.Minute}, generalRate: pacing.Rate{Limit: 100000, Window: time.Minute}}
	for _, f := range opts {
		f(&o)
	}
	// The console's tests are about pages, not about what survives a power
	// cut (cmd/simrelay's crash tests are): the store skips each commit's fsync.
	st := storetest.OpenWith(t, storetest.Options{Relayed: o.relayed})
	inbox := mailtest.NewInbox(t)
	log := slog.New(slog.DiscardHandler)
	if o.logs != nil {
		log = slog.New(slog.NewTextHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	clk := testclock.New(time.Now().UTC().Truncate(time.Second))
	srv := httptest.NewUnstartedServer(nil)
	publicURL := "http://" + srv.Listener.Addr().String()
	mailer, err := mail.New(mail.Config{SMTPURL: inbox.URL(), PublicURL: publicURL}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = mailer.Run(ctx) })
	// Cheap password hashes: the tests sign up and in often, and one hash at
	// the server's cost takes about a second of CPU under -race.
	accounts, err := account.New(account.Config{PublicURL: publicURL, PasswordTime: 1, PasswordMemory: 64, SignupClosed: o.signupClosed}, st, mailer, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	// The companies their owners close are removed in the background, as
	// simrelay serve does.
	wg.Go(func() { accounts.RunClosings(ctx, time.Minute) })
	var devStore device.Store = st
	if o.deviceStore != nil {
		devStore = o.deviceStore(st)
	}
	devices := device.New(device.Config{PublicURL: publicURL}, devStore, clk.Now)
	hooks, err := webhook.New(webhook.Config{AllowPrivate: true}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = hooks.Run(ctx) })
	st.SetInboundEvents(hooks.InboundEvents())
	messages := sms.New(sms.Config{}, st, log, clk.Now)
	hub := gateway.New(gateway.Config{HelloTimeout: 2 * time.Second}, devices, messages, log, clk.Now)
	messages.SetDispatcher(hub)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
	})
	bill, err := billing.New(billing.Config{PublicURL: publicURL, Plans: o.plans}, st, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	st.SetPlans(bill)
	agents, err := channel.New(channel.Config{}, st, log, clk.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	agents.SetDispatcher(hub)
	hub.SetAgents(agents)
	files, err := media.New(media.Config{PublicURL: publicURL, Key: []byte("media-url-key-of-the-tests-0123")}, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	broker := web.NewBroker(o.streams, clk.Now)
	// The tabs hear of the phones' links coming and going, as simrelay
	// serve's do (without device presence's events: nothing here reads them).
	// told counts what the tabs were told of each device, for a test that
	// must know a link's end reached them.
	told := &toldCount{n: map[string]int{}}
	hub.SetPresence(web.DevicePresence{Online: hub.Online, Tell: func(company uint64, fp string, online bool) {
		broker.DeviceChanged(company, fp, online)
		told.note(fp)
	}})
	messages.SetWatcher(broker)
	agents.SetWatcher(broker)
	consoleURL := publicURL
	var phones web.Phones = hub
	if o.phones != nil {
		phones = o.phones(hub)
	}
	if o.https {
		consoleURL = "https://" + srv.Listener.Addr().String()
	}
	consoleCfg := web.Config{PublicURL: consoleURL, Email: o.email, Timers: o.timers}
	consoleDeps := web.Deps{Accounts: accounts, Devices: devices, SMS: messages, Channels: agents,
		Webhooks: hooks, Media: files, Billing: bill, Phones: phones, Analytics: st, Period: bill, Broker: broker, Logger: log, Now: clk.Now, Secrets: st}
	console, err := web.New(consoleCfg, consoleDeps)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	api, err := httpapi.New(httpapi.Config{GeneralRate: o.generalRate, AuthRate: o.authRate},
		httpapi.Deps{Accounts: accounts, Devices: devices, SMS: messages, Channels: agents, Webhooks: hooks, Media: files, Phones: hub, PhoneSocket: hub, Store: st,
			Analytics: st, Period: bill, Billing: bill, Console: console.Handler(), ConsoleIdentity: console.Identity, Logger: log, Registry: reg, Gatherer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = api.Handler()
	if o.wrap != nil {
		srv.Config.Handler = o.wrap(srv.Config.Handler)
	}
	srv.Config.ConnState = o.connState
	srv.Config.RegisterOnShutdown(console.Shutdown)
	srv.Start()
	t.Cleanup(func() { console.Shutdown(); srv.Close() })
	return &env{t: t, url: srv.URL, store: st, inbox: inbox, clock: clk, accounts: accounts, broker: broker, hub: hub, told: told, sms: messages, agents: agents, handler: srv.Config.Handler,
		stop:    func() { console.Shutdown(); srv.CloseClientConnections(); srv.Listener.Close() },
		console: func() (*web.Console, error) { return web.New(consoleCfg, consoleDeps) }}
}

// company creates a company with a verified admin and returns its API key.
func (e *env) company(name, email, password string) string {
	e.t.Helper()
	_, _, key, err := e.accounts.CreateCompany(name, account.OwnerInput{Email: email, Password: password})
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

// browser is a cookie-keeping HTTP client that does not follow redirects,
// so tests see where the console sends it.
type browser struct {
	e    *env
	c    *http.Client
	csrf string // the session's token, once signed in
}

// acmeWithPhone makes the company Acme with its phone fp-1 paired, and
// answers its admin Ada's browser, signed in.
func (e *env) acmeWithPhone() *browser {
	e.t.Helper()
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	return b
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, c: &http.Client{Transport: testhttp.Transport, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) get(path string) page {
	b.e.t.Helper()
	res, err := b.c.Get(b.e.url + path)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return read(b.e.t, res)
}

func read(t *testing.T, res *http.Response) page {
	t.Helper()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: res.StatusCode, body: string(body), location: res.Header.Get("Location"), header: res.Header}
}

// errorPage says whether p is the console's own error page with status,
// saying each of says.
func (p page) errorPage(status int, says ...string) bool {
	if p.status != status || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") || !strings.Contains(p.body, "Back to the console") {
		return false
	}
	for _, s := range says {
		if !strings.Contains(p.body, s) {
			return false
		}
	}
	return true
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// tokenOf reads the CSRF token a page's forms carry.
func tokenOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no csrf field in the page (status %d)", p.status)
	}
	return m[1]
}

// noticeOf reads the notice of a form's JSON answer, failing the test
// unless the answer is 200 with one.
func noticeOf(t *testing.T, p page) string {
	t.Helper()
	var out struct{ Notice string }
	if p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &out) != nil {
		t.Fatalf("%d %s", p.status, p.body)
	}
	return out.Notice
}

// post sends a form as the page's JavaScript does (JSON answer), with the
// session's CSRF token unless form already names one.
func (b *browser) post(path string, form url.Values) page {
	b.e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok && b.csrf != "" {
		form.Set("csrf", b.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, b.e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return read(b.e.t, res)
}

// signIn signs the browser in and keeps the session's CSRF token.
func (b *browser) signIn(email, password string) {
	b.e.t.Helper()
	anon := tokenOf(b.e.t, b.get("/console/signin"))
	p := b.post("/console/signin", url.Values{"csrf": {anon}, "email": {email}, "password": {password}})
	if p.status != http.StatusOK {
		b.e.t.Fatalf("sign in %s: status %d: %s", email, p.status, p.body)
	}
	b.csrf = tokenOf(b.e.t, b.get("/console/devices"))
}

// pairPhone registers a virtual phone with a code and runs it; jobs are
// reported sent then delivered when autoReport is set.
func (e *env) pairPhone(code, fingerprint string, autoReport bool) *client.Phone {
	e.t.Helper()
	return e.linkPhone(e.registerPhone(code, fingerprint), autoReport)
}

// registerPhone registers a virtual phone with a code, as pairPhone does,
// without linking it: linkPhone does.
func (e *env) registerPhone(code, fingerprint string) client.Registration {
	e.t.Helper()
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: code, DeviceFingerprint: fingerprint, DeviceName: "Phone " + fingerprint,
		SIMs:       []proto.SIM{{Slot: "SIM1", Carrier: "Acme Mobile", PhoneNumber: "+15550109001"}, {Slot: "SIM2"}},
		AppVersion: "1.2.3",
	})
	if err != nil {
		e.t.Fatalf("register %s: %v", fingerprint, err)
	}
	return reg
}

// linkPhone runs a phone registerPhone registered, with its hello.
func (e *env) linkPhone(reg client.Registration, autoReport bool) *client.Phone {
	e.t.Helper()
	return e.runPhone(reg, proto.Hello{AppVersion: "1.2.3", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}, {Slot: "SIM2"}}}, autoReport)
}

// runPhone links a registered virtual phone (or agent) with its hello
// until the test ends; jobs are reported sent then delivered when
// autoReport is set.
func (e *env) runPhone(reg client.Registration, hello proto.Hello, autoReport bool) *client.Phone {
	e.t.Helper()
	ph, stop := e.runPhoneUntil(reg, hello, autoReport)
	e.t.Cleanup(stop)
	return ph
}

// runPhoneUntil is runPhone until stop, which ends the phone's link and
// waits for its goroutine (once; later calls do nothing).
func (e *env) runPhoneUntil(reg client.Registration, hello proto.Hello, autoReport bool) (*client.Phone, func()) {
	e.t.Helper()
	var ph *client.Phone
	ph = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken, Hello: hello,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			if autoReport {
				go func() {
					ph.Report(s.ID, proto.StatusSent, "")
					ph.Report(s.ID, proto.StatusDelivered, "")
				}()
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ph.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	poll.Until(e.t, "the link is up", ph.Connected)
	return ph, stop
}

// pairingCode makes a code through the API with the company's key.
func (e *env) pairingCode(apiKey string) string {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/device/pairing", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	res, err := testhttp.Client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	p := read(e.t, res)
	m := regexp.MustCompile(`"pairing_code":"([^"]+)"`).FindStringSubmatch(p.body)
	if m == nil {
		e.t.Fatalf("pairing: %d %s", p.status, p.body)
	}
	return m[1]
}

// toldCount counts the device changes the console's tabs were told of, by
// fingerprint.
type toldCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *toldCount) note(fp string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[fp]++
}

// of is how many changes of fp the tabs were told of.
func (c *toldCount) of(fp string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[fp]
}
