package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/cliflag"
	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

// Defaults of `simrelay serve`, as the contract sets them.
const (
	defaultListen  = "127.0.0.1:8080" // loopback: exposing the server is a deliberate act
	defaultDataDir = "./data"
	// defaultShutdownTimeout bounds how long in-flight requests may finish after SIGTERM.
	defaultShutdownTimeout = 15 * time.Second
	// sweepEvery returns memory of idle rate-limit windows and expired tokens.
	sweepEvery = time.Minute
	// The values of --signup.
	signupOpen   = "open"
	signupClosed = "closed"
)

type serveConfig struct {
	listen         string
	publicURL      string
	dataDir        string
	databaseURL    *cliflag.DatabaseURL
	logFormat      string
	logLevel       string
	smtpURL        string
	smtpFrom       string
	rateGeneral    string
	rateAuth       string
	rateLogin      string
	trustedProxies cidrList
	// connsPerIP bounds the HTTP connections one client address holds open
	// (internal/connlimit); 0 bounds nothing.
	connsPerIP      int
	shutdownTimeout time.Duration
	messageTTL      time.Duration
	pprofListen     string
	storeSyncDelay  time.Duration // measurement only: a slower disk (boltstore.Options.SyncDelay)
	// webhookAllowPrivate lets webhook URLs be http and reach private addresses.
	webhookAllowPrivate bool
	webhookWorkers      int
	webhookPerCompany   int
	// companyDailyStorage is each company's budget of bytes added per UTC day.
	companyDailyStorage byteSize
	// signup is who may create a company: signupOpen (anyone, through
	// POST /auth/signup and the console) or signupClosed (the operator
	// alone, with admin create-company).
	signup string
	// adminToken is the operator's credential for GET /admin/backup; never logged.
	adminToken string
	// plansFile replaces the built-in plans; defaultPlan is a new company's plan.
	plansFile   string
	defaultPlan string
	plans       []billing.Plan
	// stripeKey and stripeWebhookSecret switch on Stripe mode; never logged.
	stripeKey           string
	stripeWebhookSecret string
	stripeAPIURL        string

	general, auth pacing.Rate
	// login bounds the failed logins of one e-mail address (account.Config.LoginRate).
	login pacing.Rate
	// agents is the anti-ban governor's defaults (serve_pacing.go).
	agents channel.Config
	// offlineGrace is how long a phone may be away before it is reported offline.
	offlineGrace time.Duration
	// streams bounds the console's live views (serve_console.go).
	streams web.StreamConfig
	// smtpIn is the e-mail to SMS listener (serve_smtp.go).
	smtpIn smtpInConfig
	// cluster is how the node joins the others on its database (serve_cluster.go).
	cluster clusterConfig
	// linkSweep is the period of the gateway's sweep in a cluster.
	linkSweep time.Duration
	// helloTimeout is the gateway's hello deadline (gateway.Config.HelloTimeout):
	// PROTOCOL.md's 10 s but in tests.
	helloTimeout time.Duration
}

func (c *serveConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.listen, "listen", defaultListen, "address to listen on, host:port")
	fs.StringVar(&c.publicURL, "public-url", "", "the server's address as users and phones reach it, used in links, QR codes and e-mails (default http://<listen>; required when --listen is every address, 0.0.0.0:PORT, [::]:PORT or :PORT)")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir, "directory of the embedded store; with --database-url, of what this server keeps for itself (uploads while they arrive)")
	c.databaseURL = addDatabaseURL(fs)
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.smtpURL, "smtp-url", "", "SMTP server, smtp://[user:pass@]host:port[?tls=required|opportunistic|insecure] (STARTTLS; required unless a loopback host without user) or smtps://...; empty writes mail to the log and the outbox")
	fs.StringVar(&c.smtpFrom, "smtp-from", mail.DefaultFrom, "From address of e-mails")
	fs.StringVar(&c.rateGeneral, "rate-general", "100/1m", "API rate limit per API key, user or client IP, COUNT/WINDOW")
	fs.StringVar(&c.rateAuth, "rate-auth", "15/15m", "rate limit of the credential routes per client IP, COUNT/WINDOW")
	fs.StringVar(&c.rateLogin, "rate-login", account.DefaultLoginRate.String(), "failed logins (API and console) per e-mail address, whatever the client address, COUNT/WINDOW; beyond, a login for the address is refused 429 until its window ends, its password unchecked")
	fs.Var(&c.trustedProxies, "trusted-proxies", "comma-separated proxy addresses or CIDRs whose X-Forwarded-For is believed (default none: the socket peer is the client)")
	fs.IntVar(&c.connsPerIP, "max-conns-per-ip", connlimit.DefaultPerClient, "HTTP connections one client address (an IPv6 client is its /64) holds open at once (a phone link only until its device token is checked and it is registered); the --trusted-proxies are not counted; 0: no limit")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long in-flight requests may finish on SIGTERM")
	fs.StringVar(&c.pprofListen, "pprof-listen", "", "serve Go's pprof profiles on this host:port (keep it on loopback); empty: off")
	fs.DurationVar(&c.storeSyncDelay, "store-sync-delay", 0, "for measurement only: hold the embedded store's writer this long after each commit's fsync, as a slower disk would; 0 in service")
	fs.DurationVar(&c.messageTTL, "message-ttl", sms.DefaultMessageTTL, "how long a queued SMS waits for its phone before it expires")
	fs.DurationVar(&c.offlineGrace, "device-offline-grace", device.DefaultOfflineGrace, "how long a phone may be without its link before device.offline and the admins' mail (a shorter reconnect is no event)")
	fs.BoolVar(&c.webhookAllowPrivate, "webhook-allow-private", false, "let webhook URLs use http and reach loopback, private and link-local addresses (self-hosted receivers, tests)")
	fs.IntVar(&c.webhookWorkers, "webhook-workers", webhook.DefaultWorkers, "how many webhook deliveries run at once")
	fs.IntVar(&c.webhookPerCompany, "webhook-per-company", 0, "how many webhook deliveries of one company run at once (0: half of --webhook-workers, at least 1)")
	c.companyDailyStorage = store.DefaultCompanyDailyStorage
	fs.Var(&c.companyDailyStorage, "company-daily-storage", "bytes one company may add to the store per UTC day (messages, webhook events), e.g. 256MiB; 0: no limit")
	fs.StringVar(&c.signup, "signup", signupOpen, "who may create a company: open (anyone, through POST /auth/signup and the console's sign-up page) or closed (those answer 403 signup_closed; the operator creates companies with simrelay admin create-company, and their admins invite users)")
	fs.StringVar(&c.plansFile, "plans", "", "JSON file of the plans ({\"plans\":[...]}, see docs/billing.md); empty: the built-in free, starter and pro")
	fs.StringVar(&c.defaultPlan, "default-plan", "", "a new company's plan (default unlimited without Stripe, free with it)")
	fs.StringVar(&c.stripeKey, "stripe-key", "", "Stripe secret API key (sk_...): switches on Stripe mode, needs --stripe-webhook-secret; empty: self-hosted billing")
	fs.StringVar(&c.stripeWebhookSecret, "stripe-webhook-secret", "", "signing secret (whsec_...) of the Stripe webhook endpoint POST /billing/stripe/webhook")
	fs.StringVar(&c.stripeAPIURL, "stripe-api-url", "", "Stripe API base URL, e.g. a stripe-mock for tests; empty: Stripe's")
	pacingFlags(fs, &c.agents)
	consoleFlags(fs, &c.streams)
	smtpInFlags(fs, &c.smtpIn)
	clusterFlags(fs, &c.cluster)
	routingFlags(fs, &c.linkSweep)
	helloTimeoutFlag(fs, &c.helloTimeout)
	fs.StringVar(&c.adminToken, "admin-token", "", fmt.Sprintf("the operator's secret for GET /admin/backup (Authorization: Bearer TOKEN), at least %d characters; empty: that route answers 404", httpapi.MinAdminTokenLen))
}

// validate checks every setting and fills the derived ones; the first error names the flag.
func (c *serveConfig) validate() error {
	var err error
	if _, _, e := net.SplitHostPort(c.listen); e != nil {
		return fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:8080", both("listen"), c.listen)
	}
	// The public URL defaults to the bound address, which on every address
	// of the machine (0.0.0.0, [::], :PORT) is one no phone, browser or
	// e-mailed link can reach: pairing QR codes and ws_url would name it.
	if host, _, _ := net.SplitHostPort(c.listen); c.publicURL == "" && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) {
		return fmt.Errorf("%s %q listens on every address of this machine: give %s, the address users and phones reach (e.g. http://192.168.1.20:8080 or https://sms.example.com), which links, pairing QR codes and e-mails name; or listen on one address", both("listen"), c.listen, both("public-url"))
	}
	if c.pprofListen != "" {
		if _, _, e := net.SplitHostPort(c.pprofListen); e != nil {
			return fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:6060", both("pprof-listen"), c.pprofListen)
		}
	}
	// An empty public URL is derived from the bound address once listening
	// (so --listen 127.0.0.1:0 gets the real port).
	if c.publicURL != "" {
		if u, e := url.Parse(c.publicURL); e != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q: want an absolute http(s) URL such as https://sms.example.com", both("public-url"), c.publicURL)
		}
		c.publicURL = strings.TrimRight(c.publicURL, "/")
	}
	if err := validatePacing(c.agents); err != nil {
		return err
	}
	if err := validateConsole(c.streams); err != nil {
		return err
	}
	if err := c.smtpIn.validate(); err != nil {
		return err
	}
	if err := c.cluster.validate(c.store().postgres()); err != nil {
		return err
	}
	if err := validateHelloTimeout(c.helloTimeout); err != nil {
		return err
	}
	if err := validateLinkSweep(c.linkSweep); err != nil {
		return err
	}
	if c.dataDir == "" {
		return fmt.Errorf("%s must not be empty", both("data-dir"))
	}
	if c.connsPerIP < 0 {
		return fmt.Errorf("%s %d: must not be negative (0: no limit)", both("max-conns-per-ip"), c.connsPerIP)
	}
	if c.storeSyncDelay < 0 {
		return fmt.Errorf("%s %s: must not be negative", both("store-sync-delay"), c.storeSyncDelay)
	}
	if c.storeSyncDelay > 0 && c.store().postgres() {
		return fmt.Errorf("%s slows the embedded store's writer: it has no meaning with %s", both("store-sync-delay"), both(cliflag.DatabaseURLFlag))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return fmt.Errorf("%s %q: want text or json", both("log-format"), c.logFormat)
	}
	if _, e := parseLevel(c.logLevel); e != nil {
		return e
	}
	if c.general, err = pacing.ParseRate(c.rateGeneral); err != nil {
		return fmt.Errorf("%s %q: %v", both("rate-general"), c.rateGeneral, err)
	}
	if c.auth, err = pacing.ParseRate(c.rateAuth); err != nil {
		return fmt.Errorf("%s %q: %v", both("rate-auth"), c.rateAuth, err)
	}
	if c.login, err = pacing.ParseRate(c.rateLogin); err != nil {
		return fmt.Errorf("%s %q: %v", both("rate-login"), c.rateLogin, err)
	}
	if c.signup != signupOpen && c.signup != signupClosed {
		return fmt.Errorf("%s %q: want %s or %s", both("signup"), c.signup, signupOpen, signupClosed)
	}
	if c.shutdownTimeout <= 0 {
		return fmt.Errorf("%s %s: must be positive", both("shutdown-timeout"), c.shutdownTimeout)
	}
	if c.messageTTL < time.Minute {
		return fmt.Errorf("%s %s: must be at least 1m", both("message-ttl"), c.messageTTL)
	}
	if c.offlineGrace <= 0 {
		// device.SetAlerts would take it for the default, and the console's
		// settings page would show the value given, not the one in force.
		return fmt.Errorf("%s %s: must be positive", both("device-offline-grace"), c.offlineGrace)
	}
	// Checked one at a time, so the message names the flag at fault.
	if err := (mail.Config{SMTPURL: c.smtpURL}).Validate(); err != nil {
		return fmt.Errorf("%s: %v", both("smtp-url"), err)
	}
	if a, err := netmail.ParseAddress(c.smtpFrom); err != nil || !strings.Contains(a.Address, "@") {
		return fmt.Errorf("%s %q: want an address such as %q", both("smtp-from"), c.smtpFrom, "Acme SMS <sms@acme.example>")
	}
	if err := c.mailConfig().Validate(); err != nil {
		return err
	}
	if c.adminToken != "" && len(c.adminToken) < httpapi.MinAdminTokenLen {
		// The value itself is a secret: say how long it is, never what it is.
		return fmt.Errorf("%s: the token has %d characters, want at least %d (e.g. openssl rand -hex 32)", both("admin-token"), len(c.adminToken), httpapi.MinAdminTokenLen)
	}
	if c.webhookWorkers < 1 || c.webhookWorkers > webhook.MaxWorkers {
		return fmt.Errorf("%s %d: want 1 to %d", both("webhook-workers"), c.webhookWorkers, webhook.MaxWorkers)
	}
	if c.webhookPerCompany < 0 || c.webhookPerCompany > webhook.MaxWorkers {
		return fmt.Errorf("%s %d: want 0 (half the workers) to %d", both("webhook-per-company"), c.webhookPerCompany, webhook.MaxWorkers)
	}
	if c.stripeKey == "" && (c.stripeWebhookSecret != "" || c.stripeAPIURL != "") {
		return fmt.Errorf("%s and %s need %s: without a key billing runs in self-hosted mode", both("stripe-webhook-secret"), both("stripe-api-url"), both("stripe-key"))
	}
	if c.stripeKey != "" && c.stripeWebhookSecret == "" {
		return fmt.Errorf("%s is required with %s: without it no Stripe event could be verified, so no subscription would ever change", both("stripe-webhook-secret"), both("stripe-key"))
	}
	if c.stripeAPIURL != "" {
		if u, e := url.Parse(c.stripeAPIURL); e != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q: want an absolute http(s) URL such as http://127.0.0.1:12111", both("stripe-api-url"), c.stripeAPIURL)
		}
		c.stripeAPIURL = strings.TrimRight(c.stripeAPIURL, "/")
	}
	if c.plansFile != "" {
		if c.plans, err = billing.LoadPlans(c.plansFile); err != nil {
			return fmt.Errorf("%s: %v", both("plans"), err)
		}
	}
	if _, err := billing.New(c.billingConfig(), nil, nil, time.Now); err != nil {
		return fmt.Errorf("%s / %s: %v", both("plans"), both("default-plan"), err)
	}
	return c.webhookConfig().Validate()
}

// store is where the server's store is, and how it opens.
func (c *serveConfig) store() storeConfig {
	return storeConfig{dataDir: c.dataDir, databaseURL: c.databaseURL, companyDailyStorage: int64(c.companyDailyStorage), syncDelay: c.storeSyncDelay}
}

// accountConfig is the account service's configuration.
func (c *serveConfig) accountConfig() account.Config {
	return account.Config{PublicURL: c.publicURL, LoginRate: c.login, SignupClosed: c.signup == signupClosed}
}

func (c *serveConfig) billingConfig() billing.Config {
	cfg := billing.Config{Plans: c.plans, DefaultPlan: c.defaultPlan, PublicURL: c.publicURL}
	if c.stripeKey != "" {
		cfg.Provider = billing.NewStripe(billing.StripeConfig{Key: c.stripeKey, APIURL: c.stripeAPIURL})
		cfg.WebhookSecret = c.stripeWebhookSecret
	}
	return cfg
}

func (c *serveConfig) webhookConfig() webhook.Config {
	return webhook.Config{Workers: c.webhookWorkers, PerCompany: c.webhookPerCompany, AllowPrivate: c.webhookAllowPrivate}
}

func (c *serveConfig) mailConfig() mail.Config {
	return mail.Config{SMTPURL: c.smtpURL, From: c.smtpFrom, PublicURL: c.publicURL}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("%s %q: want debug, info, warn or error", both("log-level"), s)
	}
	return l, nil
}
