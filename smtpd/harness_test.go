package smtpd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/smtpd"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// domain is the mail domain of the listener in the tests.
const domain = "sms.test"

// onePlan is a plan of the tests' billing that allows one message a month.
const onePlan = "one"

// env is a running server: a real store file, the HTTP API with its phone
// socket (for reference-client phones), and the SMTP listener with STARTTLS
// on a certificate made for the test.
type env struct {
	t         *testing.T
	url       string // the HTTP API
	smtpAddr  string
	clientTLS *tls.Config
	store     store.Backend
	accounts  *account.Service
	devices   *device.Service
	sms       *sms.Service
	billing   *billing.Service
	smtp      *smtpd.Server
	// companyReads counts the listener's reads of a company record.
	companyReads *atomic.Int64
}

// countingAccounts is the account service, counting the listener's reads
// of a company record.
type countingAccounts struct {
	*account.Service
	reads *atomic.Int64
}

func (a countingAccounts) Company(ctx context.Context, p account.Principal) (store.Company, error) {
	a.reads.Add(1)
	return a.Service.Company(ctx, p)
}

type options struct {
	general, auth pacing.Rate
	cfg           smtpd.Config
}

func newEnv(t *testing.T, opt options) *env {
	t.Helper()
	st := storetest.OpenWith(t, storetest.Options{})
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewUnstartedServer(nil)
	publicURL := "http://" + srv.Listener.Addr().String()
	mailer, err := mail.New(mail.Config{PublicURL: publicURL}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// Cheap password hashes, as the API's tests use.
	accounts, err := account.New(account.Config{PublicURL: publicURL, PasswordTime: 1, PasswordMemory: 64}, st, mailer, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	devices := device.New(device.Config{PublicURL: publicURL}, st, time.Now)
	hooks, err := webhook.New(webhook.Config{}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	st.SetInboundEvents(hooks.InboundEvents())
	messages := sms.New(sms.Config{}, st, log, time.Now)
	hub := gateway.New(gateway.Config{HelloTimeout: 2 * time.Second}, devices, messages, log, time.Now)
	messages.SetDispatcher(hub)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hub.Shutdown(ctx)
	})
	one := int64(1)
	bill, err := billing.New(billing.Config{PublicURL: publicURL, Plans: []billing.Plan{
		{ID: "unlimited", Name: "Unlimited", Price: billing.Price{Currency: "usd", Interval: "month"}, Hidden: true},
		{ID: onePlan, Name: "One", Price: billing.Price{Currency: "usd", Interval: "month"}, Limits: billing.Limits{MessagesPerMonth: &one}},
	}}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	st.SetPlans(bill)
	if opt.general.Limit == 0 {
		opt.general = pacing.Rate{Limit: 100, Window: time.Minute}
	}
	if opt.auth.Limit == 0 {
		opt.auth = pacing.Rate{Limit: 15, Window: 15 * time.Minute}
	}
	reg := prometheus.NewRegistry()
	api, err := httpapi.New(httpapi.Config{GeneralRate: opt.general, AuthRate: opt.auth}, httpapi.Deps{
		Accounts: accounts, Devices: devices, SMS: messages, Phones: hub, PhoneSocket: hub, Store: st, Analytics: st,
		Period: bill, Billing: bill, Logger: log, Registry: reg, Gatherer: reg, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = api.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	serverTLS, clientTLS, err := mailtest.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cfg := opt.cfg
	cfg.Domain, cfg.TLS, cfg.Logger = domain, serverTLS, log
	companyReads := new(atomic.Int64)
	ms, err := smtpd.New(cfg, smtpd.Deps{Accounts: countingAccounts{accounts, companyReads}, Devices: devices, SMS: messages, Limits: api})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- ms.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ms.Shutdown(ctx); err != nil {
			t.Errorf("smtp shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("smtp serve: %v", err)
		}
	})
	return &env{t: t, url: srv.URL, smtpAddr: ln.Addr().String(), clientTLS: clientTLS, store: st,
		accounts: accounts, devices: devices, sms: messages, billing: bill, smtp: ms, companyReads: companyReads}
}

// company creates a company and returns its id and API key.
func (e *env) company(name string) (uint64, string) {
	e.t.Helper()
	c, _, key, err := e.accounts.CreateCompany(name, account.OwnerInput{Email: name + "@example.com", Password: "Passw0rd!"})
	if err != nil {
		e.t.Fatal(err)
	}
	return c.ID, key
}

// phone pairs a reference-client phone with the company and runs it until
// the test ends; it collects the jobs it gets.
func (e *env) phone(companyID uint64, fingerprint string) *vphone {
	e.t.Helper()
	users, err := e.store.CompanyUsers(companyID)
	if err != nil || len(users) == 0 {
		e.t.Fatalf("users of company %d: %v", companyID, err)
	}
	p, err := e.devices.CreatePairing(context.Background(), companyID, users[0].ID)
	if err != nil {
		e.t.Fatal(err)
	}
	sims := []proto.SIM{{Slot: proto.SIM1}}
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: p.Code, DeviceFingerprint: fingerprint, DeviceName: "Phone " + fingerprint, SIMs: sims, AppVersion: "test"})
	if err != nil {
		e.t.Fatalf("register %s: %v", fingerprint, err)
	}
	vp := &vphone{}
	vp.Phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello:       proto.Hello{AppVersion: "test", SelectedSIM: proto.SIM1, SIMs: sims},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			vp.mu.Lock()
			vp.jobs = append(vp.jobs, s)
			vp.mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- vp.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	poll.Until(e.t, "the phone connects", vp.Connected)
	return vp
}

type vphone struct {
	*client.Phone
	mu   sync.Mutex
	jobs []proto.Send
}

// Jobs returns the jobs received so far.
func (vp *vphone) Jobs() []proto.Send {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	return append([]proto.Send(nil), vp.jobs...)
}

// mailer is a go-mail client of the listener: STARTTLS required, AUTH PLAIN.
func (e *env) mailer(user, pass string) *gomail.Client {
	e.t.Helper()
	host, port, _ := net.SplitHostPort(e.smtpAddr)
	p, _ := strconv.Atoi(port)
	c, err := gomail.NewClient(host, gomail.WithPort(p), gomail.WithTLSPolicy(gomail.TLSMandatory),
		gomail.WithTLSConfig(e.clientTLS), gomail.WithSMTPAuth(gomail.SMTPAuthPlain),
		gomail.WithUsername(user), gomail.WithPassword(pass), gomail.WithTimeout(10*time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// send mails body (text/plain) to the recipients and returns go-mail's error.
func (e *env) send(c *gomail.Client, body string, to ...string) error {
	e.t.Helper()
	m := gomail.NewMsg()
	if err := m.From("app@example.com"); err != nil {
		e.t.Fatal(err)
	}
	if err := m.To(to...); err != nil {
		e.t.Fatal(err)
	}
	m.Subject("note")
	m.SetBodyString(gomail.TypeTextPlain, body)
	return c.DialAndSend(m)
}

// smtpCode is the SMTP reply code of a refused send, 0 if none is known.
func smtpCode(err error) int {
	var se *gomail.SendError
	if errors.As(err, &se) {
		return se.ErrorCode()
	}
	return 0
}

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore).
func TestMain(m *testing.M) { storetest.Main(m) }
