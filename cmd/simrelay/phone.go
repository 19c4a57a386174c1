package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

const phoneUsage = `Usage: simrelay phone [flags] [--inbound FROM TEXT]

A virtual phone: it pairs (with --pairing-code, or by itself with --api-key),
connects to the server like the Android app, prints each job it gets, acks
it and reports it sent and then delivered. With --inbound it also delivers
one received SMS. It runs until Ctrl-C.

Flags, each with its environment twin:
`

type phoneConfig struct {
	server      string
	pairingCode string
	apiKey      string
	token       string
	fingerprint string
	name        string
	selectedSIM string
	inbound     string
	fail        bool
}

func phoneCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg phoneConfig
	fs := flag.NewFlagSet("phone", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.server, "server", "http://"+defaultListen, "the server's base URL")
	fs.StringVar(&cfg.pairingCode, "pairing-code", "", "a pairing code from POST /device/pairing")
	fs.StringVar(&cfg.apiKey, "api-key", "", "a company API key: the phone makes its own pairing code")
	fs.StringVar(&cfg.token, "token", "", "a device token from an earlier registration: connect without pairing")
	fs.StringVar(&cfg.fingerprint, "fingerprint", "virtual-phone", "the device fingerprint")
	fs.StringVar(&cfg.name, "name", "Virtual phone", "the device name")
	fs.StringVar(&cfg.selectedSIM, "selected-sim", "BOTH", "the SIM the phone sends from: SIM1, SIM2 or BOTH")
	fs.StringVar(&cfg.inbound, "inbound", "", "deliver one received SMS from this number; its text is the argument after the flags")
	fs.BoolVar(&cfg.fail, "fail", false, "report every job failed (generic_failure) instead of delivered")
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
	if cfg.inbound == "" && text != "" {
		fmt.Fprintf(stderr, "simrelay phone: unexpected argument %q\n", text)
		return 2
	}
	if cfg.pairingCode == "" && cfg.apiKey == "" && cfg.token == "" {
		fmt.Fprintln(stderr, "simrelay phone: give --pairing-code, --api-key or --token")
		return 2
	}
	if err := runPhone(ctx, cfg, text, stdout); err != nil {
		fmt.Fprintf(stderr, "simrelay phone: %v\n", err)
		return 1
	}
	return 0
}

func runPhone(ctx context.Context, cfg phoneConfig, text string, out io.Writer) error {
	server := strings.TrimRight(cfg.server, "/")
	reg := client.Registration{DeviceToken: cfg.token, WSURL: "ws" + strings.TrimPrefix(server, "http") + "/device/ws"}
	if cfg.token == "" {
		code := cfg.pairingCode
		if code == "" {
			var err error
			if code, err = pairingCode(ctx, server, cfg.apiKey); err != nil {
				return err
			}
		}
		var err error
		reg, err = client.Register(ctx, nil, server, client.RegisterInput{
			PairingCode: code, DeviceFingerprint: cfg.fingerprint, DeviceName: cfg.name, AppVersion: "simrelay-phone " + buildVersion(),
			SIMs: []proto.SIM{{Slot: proto.SIM1, Carrier: "Virtual", PhoneNumber: "+15550100001"}, {Slot: proto.SIM2, Carrier: "Virtual", PhoneNumber: "+15550100002"}},
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "paired as %s; reconnect later with --token %s\n", cfg.fingerprint, reg.DeviceToken)
	}
	var mu sync.Mutex // keeps output lines whole
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		mu.Unlock()
	}
	var phone *client.Phone
	phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello: proto.Hello{AppVersion: "simrelay-phone " + buildVersion(), SelectedSIM: cfg.selectedSIM, SIMs: []proto.SIM{{Slot: proto.SIM1}, {Slot: proto.SIM2}}},
		OnJob: func(s proto.Send) {
			say("job %s: %s to %s from %s: %q", s.ID, s.Channel, s.To, s.SIMSlot, s.Message)
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
		OnState: func(up bool, err error) {
			if up {
				say("connected")
			} else {
				say("disconnected: %v", err)
			}
		},
	})
	if cfg.inbound != "" {
		go func() {
			ack := phone.Receive(proto.Inbound{ClientID: fmt.Sprintf("virtual-%d", time.Now().UnixNano()), From: cfg.inbound, Message: text, SIMSlot: proto.SIM1})
			select {
			case a := <-ack:
				say("inbound from %s stored as message %d (%s)", cfg.inbound, a.ID, a.UUID)
			case <-ctx.Done():
			}
		}()
	}
	return phone.Run(ctx)
}

// pairingCode asks the server for a pairing code with the company's API key.
func pairingCode(ctx context.Context, server, apiKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/device/pairing", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	res, err := http.DefaultClient.Do(req)
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
