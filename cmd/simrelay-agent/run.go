package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/agent/imessage"
	"github.com/simrelay/simrelay/agent/modem"
	"github.com/simrelay/simrelay/agent/termux"
	"github.com/simrelay/simrelay/agent/whatsapp"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// exitStop is the exit status when the server says not to come back
// (pair again, or update the agent).
const exitStop = 3

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", defaultConfigPath(), "the configuration file written by pair; the journal is next to it")
	transport := fs.String("transport", "termux", "how this device sends: termux (Android phone with Termux:API), modem (ModemManager's mmcli), whatsapp (a linked WhatsApp session) or imessage (Messages on a Mac)")
	sims := fs.String("sims", "", "termux: the phone's SIMs, e.g. SIM1 or SIM1,SIM2 or SIM1=+15550100001 (default: ask termux-telephony-deviceinfo)")
	inboundSIM := fs.String("inbound-sim", proto.SIM1, "termux: the slot reported for received SMS (termux-sms-list does not say)")
	modemID := fs.String("modem", "any", "modem: mmcli's -m value (any, an index or a D-Bus path)")
	number := fs.String("number", "", "modem: the SIM's own number in E.164, when the modem does not know it")
	perMinute := fs.Int("max-per-minute", agent.DefaultPerMinute, "SMS parts this agent sends per minute at most (Android asks the user beyond about 30); 0 = no pacing")
	poll := fs.Duration("poll", agent.DefaultDeliveryPoll, "how often the inbox and delivery reports are read")
	reconnectMax := fs.Duration("reconnect-max", agent.DefaultBackoffMax, "the longest wait between reconnects (PROTOCOL.md's CAP)")
	healthEvery := fs.Duration("health-every", agent.DefaultHealthEvery, "how often the device's battery, signal and network are reported on a live link (at least 1m; each hello carries them too)")
	session := fs.String("session", "", "whatsapp: the session file written by whatsapp link (default: whatsapp.session.db next to --config)")
	handles := fs.String("handles", "", "imessage: the Mac's iMessage handles, e.g. me@icloud.com,+15550100002 (default: the accounts chat.db names)")
	chatDB := fs.String("chat-db", "", "imessage: the Messages database (default: ~/Library/Messages/chat.db)")
	rowTimeout := fs.Duration("sent-row-timeout", imessage.DefaultRowTimeout, "imessage: how long a send may go without its row in chat.db before it is reported failed (not_delivered_by_messages)")
	mediaMax := fs.Int64("media-max-bytes", agent.DefaultMediaMaxBytes, "whatsapp, imessage: the largest media_url download")
	mediaTimeout := fs.Duration("media-timeout", agent.DefaultMediaTimeout, "whatsapp, imessage: the longest media_url download")
	mediaPrivate := fs.Bool("media-allow-private", false, "whatsapp, imessage: let media_url reach loopback, private and link-local addresses (media on your own network, tests)")
	logFormat := fs.String("log-format", "text", "text or json")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parse(fs, args); err != nil {
		return parseExit(stderr, fs, err)
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "simrelay-agent run:", err); return 1 }
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(fmt.Errorf("--log-level %q: want debug, info, warn or error", *logLevel))
	}
	if *logFormat != "text" && *logFormat != "json" {
		return fail(fmt.Errorf("--log-format %q: want text or json", *logFormat))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"poll", *poll}, {"reconnect-max", *reconnectMax}, {"media-timeout", *mediaTimeout}, {"health-every", *healthEvery}} {
		if d.v <= 0 {
			return fail(fmt.Errorf("--%s %s: must be positive", d.name, d.v))
		}
	}
	if *mediaMax <= 0 {
		return fail(fmt.Errorf("--media-max-bytes %d: must be positive", *mediaMax))
	}
	if *perMinute < 0 {
		return fail(fmt.Errorf("--max-per-minute %d: must be 0 (no pacing) or more", *perMinute))
	}
	media := agent.MediaFetcher{Dialer: newDialer(), AllowPrivate: *mediaPrivate, MaxBytes: *mediaMax, Timeout: *mediaTimeout}
	log := newLogger(stderr, *logFormat, level)

	// One agent per configuration: the journal's lock is taken before a
	// transport connects anything a second agent would disturb (a WhatsApp
	// session used twice at once). Without a configuration there is no
	// journal yet, and LoadConfig below says to pair first.
	var j *agent.Journal
	if _, err := os.Stat(*config); err == nil {
		if j, err = agent.OpenJournal(agent.JournalPath(*config), 2*time.Second); err != nil {
			return fail(err)
		}
		defer j.Close()
	}

	var tr agent.Transport
	switch *transport {
	case "termux":
		var simList []proto.SIM
		if *sims != "" {
			list, err := parseSIMs(*sims)
			if err != nil {
				return fail(err)
			}
			simList = list
		}
		if !proto.IsSIMSlot(*inboundSIM) {
			return fail(fmt.Errorf("--inbound-sim %q: want SIM1 or SIM2", *inboundSIM))
		}
		tr = termux.New(termux.Config{SIMs: simList, InboundSIM: *inboundSIM, Poll: *poll, Logger: log})
	case "modem":
		if *number != "" && !e164.MatchString(*number) {
			return fail(fmt.Errorf("--number %q: want the SIM's number in E.164, such as +15550100001 (a hello with another form is refused)", *number))
		}
		tr = modem.New(modem.Config{Modem: *modemID, Number: *number, Poll: *poll, Logger: log})
	case "whatsapp":
		if *session == "" {
			*session = defaultSessionPath(*config)
		}
		s, err := whatsapp.OpenSession(ctx, *session)
		if err != nil {
			return fail(err)
		}
		defer s.Close()
		cl, _, err := s.NewClient(ctx)
		if err != nil {
			return fail(err)
		}
		tr = whatsapp.New(whatsapp.Config{Client: cl, Media: media, Logger: log})
	case "imessage":
		var list []string
		if *handles != "" {
			list = strings.Split(*handles, ",")
		}
		if *rowTimeout <= 0 {
			return fail(errors.New("--sent-row-timeout must be positive"))
		}
		it, err := imessage.New(imessage.Config{Handles: list, ChatDB: *chatDB, Poll: *poll, RowTimeout: *rowTimeout, Media: media, Logger: log})
		if err != nil {
			return fail(err)
		}
		tr = it
	default:
		return fail(fmt.Errorf("--transport %q: want termux, modem, whatsapp or imessage", *transport))
	}

	// The tools first: a missing one is the likeliest trouble on a new
	// device, and its error says what to install.
	if err := tr.Check(ctx); err != nil {
		return fail(err)
	}
	cfg, err := agent.LoadConfig(*config)
	if err != nil {
		return fail(err)
	}
	if cfg.Salt == "" {
		// Client ids must stay the same across restarts: the salt is kept.
		cfg.Salt = agent.NewSalt()
		if err := agent.SaveConfig(*config, cfg); err != nil {
			return fail(err)
		}
	}
	if j == nil {
		if j, err = agent.OpenJournal(agent.JournalPath(*config), 2*time.Second); err != nil {
			return fail(err)
		}
		defer j.Close()
	}
	log.Info("starting", "version", buildVersion(), "transport", tr.Name(), "device", cfg.DeviceFingerprint, "server", cfg.Server)
	if u, err := url.Parse(cfg.WSURL); err == nil && u.Scheme == "ws" && strings.HasPrefix(cfg.Server, "https://") {
		// Paired before pair refused such a link address: said at each
		// start, as the token goes out in clear text on every link.
		log.Warn("the link address is ws://, not wss://: the device token crosses the network in clear text on every link; set the server's public URL to its https:// address (simrelay serve --public-url) and pair again", "ws_url", cfg.WSURL)
	}
	a := agent.New(agent.Options{Config: cfg, Transport: tr, Journal: j, AppVersion: "simrelay-agent " + buildVersion(),
		Logger: log, HTTPClient: httpClient(0), BackoffMax: *reconnectMax, Pacer: agent.NewPacer(*perMinute), DeliveryPoll: *poll, HealthEvery: *healthEvery})
	if err := a.Run(ctx); err != nil {
		var fatal *agent.FatalError
		if errors.As(err, &fatal) {
			// A distinct status, so a supervisor does not restart the
			// agent in a loop (systemd: RestartPreventExitStatus=3).
			fmt.Fprintln(stderr, "simrelay-agent run:", err)
			return exitStop
		}
		return fail(err)
	}
	log.Info("stopped")
	return 0
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// parseSIMs reads SIM1,SIM2=+15550100002.
func parseSIMs(s string) ([]proto.SIM, error) {
	var out []proto.SIM
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		slot, num, _ := strings.Cut(strings.TrimSpace(part), "=")
		if !proto.IsSIMSlot(slot) || seen[slot] {
			return nil, fmt.Errorf("--sims %q: want SIM1 and/or SIM2, each once, each optionally =+E164", s)
		}
		if num != "" && !e164.MatchString(num) {
			return nil, fmt.Errorf("--sims %q: %q is not an E.164 number such as +15550100001", s, num)
		}
		seen[slot] = true
		out = append(out, proto.SIM{Slot: slot, PhoneNumber: num})
	}
	return out, nil
}

// secretKeys are log attribute names whose values never reach a log line.
var secretKeys = []string{"token", "secret", "authorization", "password"}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		k := strings.ToLower(a.Key)
		for _, s := range secretKeys {
			if strings.Contains(k, s) {
				return slog.String(a.Key, "***")
			}
		}
		return a
	}}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
