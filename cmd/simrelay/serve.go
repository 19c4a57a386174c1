package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/smtpd"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.flags(fs)
	fs.Usage = flagUsage(fs, "Usage: simrelay serve [flags]\n\nFlags, each with its environment twin:\n")
	if err := parseFlags(fs, args, 0); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "simrelay serve: %v\n", err)
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "simrelay serve: %v\n", err)
		return 2
	}
	level, _ := parseLevel(cfg.logLevel)
	log := newLogger(stderr, cfg.logFormat, level)
	if err := runServer(ctx, cfg, log, stdout); err != nil {
		log.Error("server stopped", "err", err)
		return 1
	}
	return 0
}

// runServer wires the packages together and runs until ctx ends, then shuts
// down in order: stop accepting, finish requests, stop workers, close the store.
func runServer(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) error {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("%s %q: cannot listen there: %w", both("listen"), cfg.listen, err)
	}
	defer ln.Close()
	smtpLn, err := listenSMTP(cfg.smtpIn)
	if err != nil {
		return err
	}
	if smtpLn != nil {
		defer smtpLn.Close()
	}
	if cfg.publicURL == "" {
		cfg.publicURL = "http://" + ln.Addr().String()
	}
	where := cfg.store()
	where.logger = log.With("component", "store")
	// Every server keeps its uploads spool in --data-dir and clears it at
	// its start: the node's own lock keeps a second server out, whatever
	// the store of either (the embedded store's file lock alone let a
	// server on PostgreSQL in beside an embedded one, and the other way
	// round), before anything is made or cleared there.
	unlock, err := lockDataDir(cfg.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	// A data dir with no store gets a new, empty one: a first start, or a
	// --data-dir that names the wrong directory (a typo, another working
	// directory), where every credential would answer 401 and nothing else
	// would tell.
	_, statErr := os.Stat(filepath.Join(cfg.dataDir, boltstore.FileName))
	newStore := !where.postgres() && errors.Is(statErr, os.ErrNotExist)
	st, err := openBackend(ctx, where)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	if newStore {
		log.Info("a new, empty store was made: the data dir held none (a first start; on a server that ran before, --data-dir names another directory than its store's)", "data_dir", cfg.dataDir)
	}
	node, err := joinCluster(ctx, cfg.cluster, ln.Addr(), st, log)
	if err != nil {
		return err
	}
	defer node.leave() // before the store closes, after the links and workers stopped
	log = node.logger(log)
	// Every service times its work by one clock: on PostgreSQL the
	// database server's, so that the nodes of a cluster agree on a send's
	// end, a schedule, a retry (docs/cluster.md, Clocks).
	now := node.now()
	mailCfg := cfg.mailConfig()
	if node.bus != nil {
		// A mail another node left when it died is this one's to find.
		mailCfg.Poll = mail.DefaultClusterPoll
	}
	mailer, err := mail.New(mailCfg, st, log.With("component", "mail"), now)
	if err != nil {
		return err
	}
	accounts, err := account.New(cfg.accountConfig(), st, mailer, log.With("component", "account"), now)
	if err != nil {
		return err
	}
	if account.TestCostBuild {
		log.Warn("this build hashes passwords at a test's cost (the simrelay_testcost tag, for make test's binaries): never serve users with it")
	}
	devices := device.New(device.Config{PublicURL: cfg.publicURL}, st, now)
	mediaKey, err := st.Secret(media.KeySecret, 32)
	if err != nil {
		return err
	}
	// Uploads arrive in the data dir, not in a shared /tmp (often memory):
	// beside the embedded store, on the disk they end on, in a directory
	// this server alone uses (the store's lock, or on PostgreSQL the data
	// dir's, is held), so a start clears what a crash left there.
	files, err := media.New(media.Config{PublicURL: cfg.publicURL, Key: mediaKey, TempDir: filepath.Join(cfg.dataDir, "uploads")}, st, now)
	if err != nil {
		return err
	}
	hookCfg := cfg.webhookConfig()
	hookCfg.MediaURLs = files
	if node.bus != nil {
		// Other nodes enqueue deliveries and leave expired leases without
		// kicking this one's dispatcher: it looks at the outbox every poll.
		hookCfg.Poll = webhook.DefaultClusterPoll
	}
	hooks, err := webhook.New(hookCfg, st, log.With("component", "webhook"), now)
	if err != nil {
		return err
	}
	// Status changes of outbound messages, new inbound messages and the
	// changes of devices write their webhook events in their own transaction.
	st.SetStatusEvents(hooks.StatusEvents())
	st.SetInboundEvents(hooks.InboundEvents())
	st.SetDeviceEvents(hooks.DeviceEvents())
	// Entries with a mailto: url are delivered through the mail outbox.
	hooks.SetMailer(mailer)
	smsCfg := sms.Config{MessageTTL: cfg.messageTTL}
	if node.bus != nil {
		// Messages scheduled on a node that died are released by the others.
		smsCfg.SchedulePoll = sms.DefaultClusterSchedulePoll
	}
	messages := sms.New(smsCfg, st, log.With("component", "sms"), now)
	jobLife := sms.MaxQueuedLife(cfg.messageTTL)
	hub := gateway.New(gateway.Config{JobLife: jobLife, HelloTimeout: cfg.helloTimeout}, devices, messages, log.With("component", "gateway"), now)
	// In a cluster the services reach the phones through the routes.
	routes, err := routePhones(node, hub, cfg.linkSweep, jobLife, log.With("component", "gateway"))
	if err != nil {
		return err
	}
	messages.SetDispatcher(routes)
	if err := messages.SetFailoverHub(routes); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	// Devices mail their admins when offline.
	devices.SetAlerts(device.Alerts{Mailer: mailer, OfflineGrace: cfg.offlineGrace,
		DevicesURL: cfg.publicURL + web.Prefix + "/devices", Logger: log.With("component", "device")})
	// The console's live views hear of devices' links coming and going
	// (livePresence) as of message changes, on a cluster of every node's.
	broker := web.NewBroker(cfg.streams, now)
	live, err := startLive(node.bus, broker, log.With("component", "live"))
	if err != nil {
		return err
	}
	defer live.Close() // before node.leave closes the bus
	presence := devices.NewPresence(routes.presenceOnline)
	linked := web.DevicePresence{Next: presence, Online: routes.Online, Tell: live.DeviceChanged}
	hub.SetPresence(linked)
	if routes.gw != nil {
		routes.gw.SetPresence(linked)
	}
	defer presence.Stop() // before the store closes: an offline check may be writing
	// Presence, not presenceOnline: a device is left alone only when it is
	// linked, never for a database that did not answer.
	if err := presence.Resume(routes.Presence); err != nil {
		return fmt.Errorf("devices online when the server last stopped: %w", err)
	}
	shared, err := shareLimits(node.bus, st, accounts, devices, cfg.sharedSettings, log.With("component", "cluster"))
	if err != nil {
		return err
	}
	if shared.peers != nil {
		node.hear(shared.peers)
	}
	agentCfg := cfg.agents
	agentCfg.MessageTTL = cfg.messageTTL
	// In a cluster a number's caps count every node's sends (channel.Config.Shared).
	agentCfg.Shared = node.bus != nil
	// The flags start at the defaults: a gap of 0s to 0s is no gap, and a
	// --number-warmup of 0s no warm-up, not "the default".
	agentCfg.Exact = true
	agents, err := channel.New(agentCfg, st, log.With("component", "channel"), now, rand.NewPCG(rand.Uint64(), rand.Uint64()))
	if err != nil {
		return err
	}
	agents.SetDispatcher(routes)
	hub.SetAgents(agents)
	devices.OnDelete(agents.Released)        // the jobs a deleted agent was handed go to its numbers' holders
	accounts.OnRemoved(agents.ForgetCompany) // a removed company's numbers leave the governor
	bill, err := billing.New(cfg.billingConfig(), st, log.With("component", "billing"), now)
	if err != nil {
		return err
	}
	st.SetPlans(bill)
	// The console's live updates hear of every message change after its
	// commit, on a cluster those of every node (serve_live.go).
	shared.shareStreams(broker)
	messages.SetWatcher(live)
	agents.SetWatcher(live)
	console, err := web.New(web.Config{PublicURL: cfg.publicURL, Email: consoleEmail(cfg.smtpIn, smtpLn)}, web.Deps{Accounts: accounts, Devices: devices, SMS: messages, Channels: agents,
		Webhooks: hooks, Media: files, Billing: bill, Phones: routes, Analytics: st, Period: bill, Broker: broker, Logger: log.With("component", "console"), Now: now,
		Secrets: st})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	node.metrics(reg)
	shared.metrics(reg)
	live.register(reg)
	if bolt, ok := st.(*boltstore.Store); ok {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "simrelay_store_folded_writes_total",
			Help: "Message record writes saved by writing a job's status changes of one commit (an ack and its report) once.",
		}, func() float64 { return float64(bolt.FoldedWrites()) }))
	}
	// A closing company whose removal keeps failing here waits longer for
	// each try (account.RunClosings): these say so, for an alert.
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "simrelay_company_removals_failing",
		Help: "Closing companies whose last removal step failed on this node, each tried again after a wait that doubles from a minute to an hour (docs/operations.md, Removing a company). Above 0 for long: read the log's 'company removal failing' lines.",
	}, func() float64 { return float64(accounts.ClosingsFailing()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "simrelay_company_removal_failures_total",
		Help: "Tries at a closing company's removal that failed on this node since it started.",
	}, func() float64 { return float64(accounts.ClosingFailures()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "simrelay_governor_numbers",
		Help: "WhatsApp numbers and iMessage handles whose pacing state (about 600 bytes each) this node holds: those that sent within about a day and a quarter of an hour, or dispatched within about two hours, less those of companies removed (docs/pacing.md, Bounded memory).",
	}, func() float64 { return float64(agents.GovernorNumbers()) }))
	// One client address holds at most its share of the connections (the
	// server's timeouts bound each one's life, not their number); a trusted
	// proxy carries many clients and is not counted. One over the bound is
	// answered 429 before its request is read.
	limited := connlimit.New(ln, connlimit.Config{PerClient: cfg.connsPerIP, Exempt: cfg.trustedProxies, Refuse: httpapi.RefuseConnection})
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "simrelay_http_conns_refused_total",
		Help: "HTTP connections refused because their client address held --max-conns-per-ip already.",
	}, func() float64 { return float64(limited.Refused()) }))
	api, err := httpapi.New(httpapi.Config{GeneralRate: cfg.general, AuthRate: cfg.auth, TrustedProxies: cfg.trustedProxies, AdminToken: cfg.adminToken, PublicURL: cfg.publicURL,
		Version: buildVersion()},
		httpapi.Deps{Accounts: accounts, Devices: devices, SMS: messages, Channels: agents, Webhooks: hooks, Media: files, Phones: routes, PhoneSocket: hub, Store: st, Bus: node.readiness(), Analytics: st, Period: bill, Billing: bill, Console: console.Handler(), ConsoleIdentity: console.Identity, Logger: log, Registry: reg, Gatherer: reg, Now: now,
			Limiters: shared.limiters})
	if err != nil {
		return err
	}

	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// The console's live streams never end by themselves: close them when
	// the shutdown starts, or they would hold it until its deadline.
	srv.RegisterOnShutdown(console.Shutdown)

	if cfg.pprofListen != "" {
		stopProfiles, err := servePprof(cfg.pprofListen, stdout, log)
		if err != nil {
			return err
		}
		defer stopProfiles()
	}
	// The SMTP listener sends through the same services, and its sends and
	// failed logins count in the API's rate-limit windows.
	stopSMTP, err := startSMTP(cfg.smtpIn, smtpLn, smtpd.Deps{Accounts: accounts, Devices: devices, SMS: messages, Limits: api}, log.With("component", "smtp"))
	if err != nil {
		return err
	}
	prunes, err := pruner(node, where, st, accounts, log)
	if err != nil {
		return err
	}
	workers, stopWorkers := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mailer.Run(workers); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("mail worker stopped", "err", err)
		}
	})
	wg.Go(func() { sweep(workers, api) })
	wg.Go(func() { prunes(workers) })
	// Every node finishes the companies their owners closed (and the admin
	// command runs left): at start, at once after a closing here, and
	// every sweep.
	wg.Go(func() { accounts.RunClosings(workers, sweepEvery) })
	wg.Go(func() { node.run(workers) })
	wg.Go(func() { shared.run(workers) })
	if routes.gw != nil {
		wg.Go(func() { routes.gw.Run(workers) })
	}
	wg.Go(func() { messages.Run(workers) })
	wg.Go(func() { agents.Run(workers) })
	wg.Go(func() {
		if err := hooks.Run(workers); err != nil {
			log.Error("webhook workers stopped", "err", err)
		}
	})

	// shutdown stops in order: stop accepting (HTTP and e-mail at once),
	// finish requests and mails, tell the phones to come back.
	shutdown := func() {
		log.Info("shutting down")
		api.Drain()
		sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
		defer cancel()
		var mails sync.WaitGroup
		mails.Go(func() { stopSMTP(sctx) })
		if e := srv.Shutdown(sctx); e != nil {
			log.Warn("requests still running at the shutdown deadline were cut", "err", e)
		}
		mails.Wait()
		// Hijacked phone links are not the HTTP server's: tell them to come back.
		if e := hub.Shutdown(sctx); e != nil {
			log.Warn("phone links still closing at the shutdown deadline were cut", "err", e)
		}
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(limited) }()
	// No "node" here: on PostgreSQL the logger names the node in every line
	// already (node.logger), and a second node= would be a duplicate key, in
	// JSON too; an embedded store has no node to name.
	log.Info("simrelay listening", "addr", ln.Addr().String(), "public_url", cfg.publicURL, "store", where.kind(), "bus", onOff(node.bus != nil), "store_at", where.where(), "data_dir", cfg.dataDir,
		"version", buildVersion(), "mail_out", cfg.mailConfig().Redacted(), "smtp_listen", smtpListening(smtpLn), "admin_backup", onOff(cfg.adminToken != ""), "signup", cfg.signup,
		"stripe", onOff(cfg.stripeKey != ""), "stripe_api_url", cfg.stripeAPIURL)
	fmt.Fprintf(stdout, "simrelay %s listening on http://%s\n", buildVersion(), ln.Addr())

	select {
	case err = <-serveErr:
		err = fmt.Errorf("http server: %w", err)
		sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
		stopSMTP(sctx)
		cancel()
	case <-node.lost:
		err = errors.New("this node's row in the cluster's registry is gone or another process's (its name taken over, or the server's keys rotated, while it was silent): start it again")
		shutdown()
	case <-ctx.Done():
		shutdown()
	}
	stopWorkers()
	wg.Wait()
	log.Info("stopped")
	return err
}

// sweep returns memory of expired rate-limit windows, the node's own.
func sweep(ctx context.Context, api *httpapi.Server) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			api.Sweep()
		}
	}
}

// onOff says whether a secret setting is set without showing it.
func onOff(set bool) string {
	if set {
		return "on"
	}
	return "off"
}

// smtpListening is where the e-mail-to-SMS listener takes mail, or "off":
// the listening line names it beside the outgoing mail (mail_out), which
// the two share nothing with.
func smtpListening(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}
