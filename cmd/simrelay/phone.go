package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/problem"
)

const phoneUsage = `Usage: simrelay phone [flags] [--inbound FROM TEXT]

A virtual phone: it pairs (with --pairing-code, or by itself with --api-key),
connects to the server like the Android app, prints each job it gets, acks
it and reports it sent and then delivered. With --inbound it also delivers
one received SMS. It runs until Ctrl-C, which ends its link with a close
frame, 1001 going away (waiting at most 2 s for the server's answer).

With --whatsapp NUMBER and --imessage HANDLE (each repeatable) it is also an
agent of those channels: it announces them in its hello and answers their
jobs like SMS; --inbound-to one of them delivers the --inbound message on
WhatsApp or iMessage to it instead of as an SMS. What the flags put in
its hello (--selected-sim, --whatsapp and --imessage, numbers in E.164,
and the health flags) is checked at start, as the server checks it: a
hello the server refused would be refused again at every reconnect. So is
--fingerprint when it may pair: the server refuses to register one that
is not 1 to 128 letters, digits, dots, dashes, underscores or colons (or
is . or ..), and with --api-key a pairing code was made for it first.

Like the app, it keeps its device token after pairing, in --token-file
(mode 0600; by default ./data/phone-FINGERPRINT.json), and uses it on the
next start instead of pairing again, which spends the server's
authentication rate limit. It pairs again only when the server says the
token is dead (HTTP 401, or close 4501) and --pairing-code or --api-key is
given, or when the token file is damaged (it says so, and without either
stops). A token refused by the link address the server named right after
pairing (a server whose --public-url is not its own) stops it, naming that
address, rather than pair again. It prints one line for each link that
ends and each wait for a server that does not answer.

Flags, each with its environment twin:
`

type phoneConfig struct {
	server      string
	pairingCode string
	apiKey      string
	token       string
	tokenFile   string
	fingerprint string
	name        string
	selectedSIM string
	inbound     string
	fail        bool
	// whatsapp and imessage are announced in hello (phone_agents.go).
	whatsapp, imessage stringList
	inboundTo          string
	// health, when any of it is set, rides in every hello (PROTOCOL.md 8.11).
	battery, signal int // -1: not reported
	charging        bool
	network         string
}

// health is the hello's health object of the flags; nil when none is set.
func (cfg phoneConfig) health() *proto.Health {
	if cfg.battery < 0 && cfg.signal < 0 && !cfg.charging && cfg.network == "" {
		return nil
	}
	h := &proto.Health{Network: cfg.network}
	if cfg.battery >= 0 {
		h.Battery = &cfg.battery
	}
	if cfg.signal >= 0 {
		h.Signal = &cfg.signal
	}
	h.Charging = &cfg.charging
	return h
}

func phoneCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg phoneConfig
	fs := flag.NewFlagSet("phone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.server, "server", "http://"+defaultListen, "the server's base URL")
	fs.StringVar(&cfg.pairingCode, "pairing-code", "", "a pairing code from POST /device/pairing")
	fs.StringVar(&cfg.apiKey, "api-key", "", "a company API key: the phone makes its own pairing code")
	fs.StringVar(&cfg.token, "token", "", "a device token from an earlier registration: connect without pairing (not saved)")
	fs.StringVar(&cfg.tokenFile, "token-file", "", "where the device token is kept between starts (default ./data/phone-FINGERPRINT.json)")
	fs.StringVar(&cfg.fingerprint, "fingerprint", "virtual-phone", "the device fingerprint")
	fs.StringVar(&cfg.name, "name", "Virtual phone", "the device name it registers with (1 to 100 bytes), which the device list and the console show; a phone paired already keeps its name")
	fs.StringVar(&cfg.selectedSIM, "selected-sim", proto.BothSIMs, "the SIM the phone sends from: SIM1, SIM2 or BOTH")
	fs.StringVar(&cfg.inbound, "inbound", "", "deliver one received SMS from this number; its text is the argument after the flags")
	fs.Var(&cfg.whatsapp, "whatsapp", "a WhatsApp number (E.164) to announce and send from; repeat for more")
	fs.Var(&cfg.imessage, "imessage", "an iMessage handle (E.164 or e-mail) to announce and send from; repeat for more")
	fs.StringVar(&cfg.inboundTo, "inbound-to", "", "deliver the --inbound message on WhatsApp or iMessage to this --whatsapp number or --imessage handle")
	fs.BoolVar(&cfg.fail, "fail", false, "report every job failed (generic_failure) instead of delivered")
	fs.IntVar(&cfg.battery, "battery", -1, "report this battery level (percent, 0-100) in the hello's health; -1: none")
	fs.BoolVar(&cfg.charging, "charging", false, "report the phone on a charger in the hello's health")
	fs.IntVar(&cfg.signal, "signal", -1, "report this signal strength (percent, 0-100) in the hello's health; -1: none")
	fs.StringVar(&cfg.network, "network", "", "report this network type (lte, nr, wifi...) in the hello's health")
	fs.Usage = flagUsage(fs, phoneUsage)
	if err := parseFlags(fs, args, 1); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "simrelay phone: %v\n", err)
		return 2
	}
	text := fs.Arg(0)
	if cfg.inbound != "" && text == "" {
		fmt.Fprintln(stderr, "simrelay phone: --inbound FROM needs the message text as an argument: --inbound +15551234567 \"hello\"")
		return 2
	}
	for name, v := range map[string]int{"--battery": cfg.battery, "--signal": cfg.signal} {
		if v < -1 {
			// Below -1 is no level: read as "none" it hid the typo.
			fmt.Fprintf(stderr, "simrelay phone: %s %d: want a percent, 0-100, or -1 for none\n", name, v)
			return 2
		}
	}
	if h := cfg.health(); h != nil {
		if _, err := device.ValidHealth(*h, "--"); err != nil {
			pe, _ := problem.As(err)
			fmt.Fprintf(stderr, "simrelay phone: %s\n", pe.Message)
			return 2
		}
	}
	if err := helloFault(cfg); err != nil {
		fmt.Fprintf(stderr, "simrelay phone: %v\n", err)
		return 2
	}
	// The name is a person's, held to a rename's rules: the server would
	// refuse one too long (after a pairing code was made for it) and
	// silently replace one with nothing visible by "Android phone".
	if err := device.CheckName("--name", cfg.name); err != nil {
		pe, _ := problem.As(err)
		fmt.Fprintf(stderr, "simrelay phone: %s\n", pe.Message)
		return 2
	}
	if cfg.pairingCode != "" || cfg.apiKey != "" {
		// A fingerprint the server refuses to register: with --api-key
		// the phone would make a pairing code for a registration
		// answered 400, a code left live for ten minutes.
		if err := device.CheckFingerprint("--fingerprint", cfg.fingerprint); err != nil {
			pe, _ := problem.As(err)
			fmt.Fprintf(stderr, "simrelay phone: %s\n", pe.Message)
			return 2
		}
	}
	if _, err := inboundFrame(cfg, "", text); err != nil {
		fmt.Fprintf(stderr, "simrelay phone: %v\n", err)
		return 2
	}
	if cfg.inbound == "" && text != "" {
		fmt.Fprintf(stderr, "simrelay phone: unexpected argument %q\n", text)
		return 2
	}
	cfg.server = strings.TrimRight(cfg.server, "/")
	if cfg.tokenFile == "" {
		cfg.tokenFile = defaultPhoneTokenFile(cfg.fingerprint)
	}
	if cfg.pairingCode == "" && cfg.apiKey == "" && cfg.token == "" {
		var damaged *damagedTokenFile
		if _, ok, err := loadPhoneToken(cfg.tokenFile, cfg.server, cfg.fingerprint); errors.As(err, &damaged) {
			fmt.Fprintf(stderr, "simrelay phone: %v: give --pairing-code, --api-key or --token to pair again\n", err)
			return 2
		} else if err != nil {
			fmt.Fprintf(stderr, "simrelay phone: %v\n", err)
			return 2
		} else if !ok {
			fmt.Fprintf(stderr, "simrelay phone: no device token of %s for %s in %s: give --pairing-code, --api-key or --token\n", cfg.fingerprint, cfg.server, cfg.tokenFile)
			return 2
		}
	}
	if err := runPhone(ctx, cfg, text, stdout); err != nil && ctx.Err() == nil {
		// An error after Ctrl-C (or SIGTERM) is the stop itself, not a fault.
		fmt.Fprintf(stderr, "simrelay phone: %v\n", err)
		return 1
	}
	return 0
}

// runPhone keeps the virtual phone linked until ctx ends, pairing again
// when the server declares its token dead and it has the means to.
func runPhone(ctx context.Context, cfg phoneConfig, text string, out io.Writer) error {
	var mu sync.Mutex // keeps output lines whole
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		mu.Unlock()
	}
	canPair := cfg.pairingCode != "" || cfg.apiKey != ""
	reg, paired, err := phoneRegistration(ctx, cfg, say, false)
	if err != nil {
		return err
	}
	clientID := fmt.Sprintf("virtual-%d", time.Now().UnixNano()) // the same on every link and after pairing again
	for {
		var linked atomic.Bool
		err := linkPhone(ctx, cfg, reg, clientID, text, say, &linked)
		why, dead := deadToken(err)
		if !dead {
			return err
		}
		if paired && !linked.Load() {
			// The token was handed out a moment ago: the link address the
			// server named is another server's. Pairing again would get
			// the same address, and spend the authentication rate limit
			// each time.
			return fmt.Errorf("the server at %s paired this phone, but its link address %s refused the token it had just handed out (%s): that address is not this server's; start the server with --public-url (SIMRELAY_PUBLIC_URL) naming its own address, or its load balancer's", cfg.server, reg.WSURL, why)
		}
		if cfg.token != "" || !canPair {
			if cfg.token == "" {
				// PROTOCOL.md 4.7: a dead token is deleted, and the phone pairs again.
				_ = os.Remove(cfg.tokenFile)
			}
			return fmt.Errorf("the device token is no longer valid (%s): pair again with --pairing-code or --api-key", why)
		}
		say("the device token is no longer valid (%s); pairing again", why)
		if reg, paired, err = phoneRegistration(ctx, cfg, say, true); err != nil {
			return err
		}
	}
}

// deadToken says whether a phone's run ended because the server refused
// its token: HTTP 401 on the upgrade, or close 4501.
func deadToken(err error) (why string, dead bool) {
	var apiErr *client.APIError
	var closed *client.ClosedError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return fmt.Sprintf("HTTP %d %s", apiErr.Status, apiErr.Code), true
	case errors.As(err, &closed) && closed.Code == proto.CloseBadToken:
		return fmt.Sprintf("close %d %s", closed.Code, closed.Reason), true
	}
	return "", false
}

// phoneRegistration is the device token to link with: --token, else the
// one saved in the token file (unless fresh), else a new registration,
// which is saved there; paired says it is a new one.
func phoneRegistration(ctx context.Context, cfg phoneConfig, say func(string, ...any), fresh bool) (reg client.Registration, paired bool, err error) {
	if cfg.token != "" {
		return client.Registration{DeviceToken: cfg.token, WSURL: "ws" + strings.TrimPrefix(cfg.server, "http") + "/device/ws"}, false, nil
	}
	if !fresh {
		saved, ok, err := loadPhoneToken(cfg.tokenFile, cfg.server, cfg.fingerprint)
		var damaged *damagedTokenFile
		switch {
		case errors.As(err, &damaged):
			// The phone can pair (run checked): it does, and the new
			// token replaces the damaged file.
			say("%v; pairing again", err)
		case err != nil:
			return client.Registration{}, false, err
		}
		if ok {
			say("using the device token of %s saved in %s", cfg.fingerprint, cfg.tokenFile)
			return client.Registration{DeviceToken: saved.DeviceToken, WSURL: saved.WSURL}, false, nil
		}
	}
	// A server that is not up yet is waited for, as the link does later.
	wait := time.Second
	for {
		reg, err := pairPhone(ctx, cfg, say, fresh)
		var op *net.OpError
		if err == nil || !errors.As(err, &op) || op.Op != "dial" {
			return reg, err == nil, err
		}
		say("waiting for the server at %s: %s; retrying in %s", cfg.server, dialProblem(op), wait)
		select {
		case <-ctx.Done():
			return reg, false, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// pairPhone pairs the virtual phone once: a pairing code (its own with an
// API key), registration, and the token saved.
func pairPhone(ctx context.Context, cfg phoneConfig, say func(string, ...any), fresh bool) (client.Registration, error) {
	// The pairing's requests are the phone's last on plain HTTP, on a
	// client of their own: its idle keep-alive connection, closed when the
	// pairing ends, would otherwise stay open beside the link, a place in
	// the server's bound of connections per address (a fleet of virtual
	// phones from one address would fill it with idle ones). Closing
	// http.DefaultClient's instead closed every idle connection of the
	// process, another pairing's about to send its request among them.
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	code := cfg.pairingCode
	if cfg.apiKey != "" && (code == "" || fresh) {
		var err error
		if code, err = pairingCode(ctx, hc, cfg.server, cfg.apiKey); err != nil {
			return client.Registration{}, err
		}
	}
	reg, err := client.Register(ctx, hc, cfg.server, client.RegisterInput{
		PairingCode: code, DeviceFingerprint: cfg.fingerprint, DeviceName: cfg.name, AppVersion: "simrelay-phone " + buildVersion(),
		SIMs: []proto.SIM{{Slot: proto.SIM1, Carrier: "Virtual", PhoneNumber: "+15550100001"}, {Slot: proto.SIM2, Carrier: "Virtual", PhoneNumber: "+15550100002"}},
	})
	hc.CloseIdleConnections()
	if err != nil {
		return reg, err
	}
	if err := savePhoneToken(cfg.tokenFile, savedPhone{Server: cfg.server, Fingerprint: cfg.fingerprint, DeviceToken: reg.DeviceToken, WSURL: reg.WSURL}); err != nil {
		return reg, err
	}
	say("paired as %s; device token saved in %s", cfg.fingerprint, cfg.tokenFile)
	return reg, nil
}

// linkPhone runs one registration's phone until ctx ends or the server
// refuses it for good; linked is set once a link is up.
func linkPhone(ctx context.Context, cfg phoneConfig, reg client.Registration, clientID, text string, say func(string, ...any), linked *atomic.Bool) error {
	var phone *client.Phone
	phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello: agentHello(proto.Hello{AppVersion: "simrelay-phone " + buildVersion(), SelectedSIM: cfg.selectedSIM, SIMs: []proto.SIM{{Slot: proto.SIM1}, {Slot: proto.SIM2}}, Health: cfg.health()}, cfg),
		OnJob: func(s proto.Send) {
			say("%s", jobLine(s))
			go func() {
				if cfg.fail {
					phone.Report(s.ID, proto.StatusFailed, "generic_failure")
					say("job %s: reported failed", s.ID)
					return
				}
				phone.Report(s.ID, proto.StatusSent, "")
				phone.Report(s.ID, proto.StatusDelivered, "")
				say("job %s: reported sent, then delivered", s.ID)
			}()
		},
		OnConfig: func(c proto.Config) {
			say("config: selected_sim %s, name %q, status %s", c.SelectedSIM, c.DeviceName, c.Status)
		},
		OnState: func(up bool, _ error) {
			if up {
				linked.Store(true)
				say("connected")
			}
		},
		OnRetry: func(err error, wait time.Duration) { say("%s", retryLine(cfg.server, err, wait)) },
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.inbound != "" {
		go func() {
			in, _ := inboundFrame(cfg, clientID, text) // checked at start
			ack := phone.Receive(in)
			select {
			case a := <-ack:
				if in.Channel == proto.ChannelSMS {
					say("inbound from %s stored as message %d (%s)", cfg.inbound, a.ID, a.UUID)
				} else {
					say("%s inbound from %s to %s stored as message %d (%s)", in.Channel, cfg.inbound, in.To, a.ID, a.UUID)
				}
			case <-ctx.Done():
			}
		}()
	}
	return phone.Run(ctx)
}

// retryLine says in one line why the last link attempt ended and when the
// next one comes.
func retryLine(server string, err error, wait time.Duration) string {
	in := wait.Round(time.Second)
	if wait < time.Second {
		in = wait.Round(time.Millisecond)
	}
	var ce websocket.CloseError
	var dial *client.DialError
	var apiErr *client.APIError
	switch {
	case errors.As(err, &ce):
		return strings.TrimSpace(fmt.Sprintf("link closed: %d %s", int(ce.Code), ce.Reason)) + fmt.Sprintf("; reconnecting in %s", in)
	case errors.As(err, &dial):
		return fmt.Sprintf("waiting for the server at %s: %s; retrying in %s", server, dialProblem(dial.Err), in)
	case errors.As(err, &apiErr):
		refused := fmt.Sprintf("the server refused the link: %d", apiErr.Status)
		if apiErr.Code != "" { // a proxy's answer has no error body
			refused += " " + apiErr.Code
		}
		if msg := sentenceBody(apiErr.Message); msg != "" {
			refused += ": " + msg
		}
		return refused + fmt.Sprintf("; retrying in %s", in)
	default:
		return fmt.Sprintf("link lost: %v; reconnecting in %s", err, in)
	}
}

// sentenceBody is the server's message ready to be followed by more of
// the line: without the full stop that ends its sentence ("connect again
// shortly." followed by "; retrying" would read ".; retrying"). An
// ellipsis, a question or an exclamation keeps its mark.
func sentenceBody(msg string) string {
	msg = strings.TrimSpace(msg)
	if strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "..") {
		msg = strings.TrimSpace(strings.TrimSuffix(msg, "."))
	}
	return msg
}

// dialProblem is the network's own words for a failed dial
// ("connection refused", "i/o timeout"), without the layers around them.
func dialProblem(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// pairingCode asks the server for a pairing code with the company's API
// key, through hc.
func pairingCode(ctx context.Context, hc *http.Client, server, apiKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/device/pairing", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	res, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("pairing: %w", err)
	}
	defer res.Body.Close()
	var body struct {
		Code    string `json:"pairing_code"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("pairing: %s", res.Status)
	}
	if res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("pairing: %s: %s", body.Error, body.Message)
	}
	return body.Code, nil
}
