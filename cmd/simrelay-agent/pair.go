package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/android-protocol/client"
)

func pairCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pair", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "the server's base URL, e.g. https://sms.example.com")
	code := fs.String("code", "", "the pairing code shown by the console or POST /device/pairing")
	uri := fs.String("uri", "", "the pairing URI of the QR code (simrelay://pair?server=...&code=...), instead of --server and --code")
	config := fs.String("config", defaultConfigPath(), "the configuration file to write (mode 0600); the journal lives next to it")
	name := fs.String("name", "", "the device's display name (default: the host name)")
	fingerprint := fs.String("fingerprint", "", "the device's stable identity (default: kept from an earlier pairing, else agent-<host>-<random>)")
	allowHTTP := fs.Bool("allow-http", false, "allow an http:// server (local testing only: the token would travel in clear text)")
	if err := parse(fs, args); err != nil {
		return parseExit(stderr, fs, err)
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "simrelay-agent pair:", err); return 1 }
	if *uri != "" {
		s, c, err := agent.ParsePairingURI(*uri)
		if err != nil {
			return fail(err)
		}
		*server, *code = s, c
	}
	if *server == "" || *code == "" {
		return fail(fmt.Errorf("give --server and --code, or --uri"))
	}
	*server = strings.TrimRight(*server, "/")
	if err := agent.CheckServerURL(*server, *allowHTTP); err != nil {
		return fail(err)
	}
	prev, _ := agent.LoadConfig(*config)
	host, _ := os.Hostname()
	if *fingerprint == "" {
		*fingerprint = prev.DeviceFingerprint
	}
	if *fingerprint == "" {
		*fingerprint = newFingerprint(host)
	}
	if *name == "" {
		*name = host
	}
	*name = cutName(*name, maxNameBytes)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reg, err := client.Register(ctx, pairClient(), *server, client.RegisterInput{
		PairingCode: *code, DeviceFingerprint: *fingerprint, DeviceName: *name, AppVersion: "simrelay-agent " + buildVersion()})
	if err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && strings.HasPrefix(apiErr.Code, "http_") {
			// No error body of the contract: no simrelay server answered.
			return fail(fmt.Errorf("%s/device/register answered %s, not as a simrelay server does: check --server, the server's base URL (the console's address, such as https://sms.example.com)", *server, apiErr.Message))
		}
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			// A simrelay server's own 404 (not_found, "There is no route
			// ..."): its registration route never answers 404, so
			// --server names a path under the server, not its base URL.
			return fail(fmt.Errorf("%s/device/register answered %d %s (%s), so no registration route is there: check --server, the server's base URL (the console's address, such as https://sms.example.com)", *server, apiErr.Status, apiErr.Code, strings.TrimSuffix(apiErr.Message, ".")))
		}
		return fail(err)
	}
	if why := reg.Problem(); why != "" {
		return fail(fmt.Errorf("%s/device/register answered a registration that cannot be used (%s): check --server, the server's base URL (the console's address, such as https://sms.example.com)", *server, why))
	}
	if u, err := url.Parse(reg.WSURL); err == nil && u.Scheme == "ws" && !*allowHTTP {
		// The link would carry the token in clear text, the very thing the
		// https:// --server was for (PROTOCOL.md 4.4).
		return fail(fmt.Errorf("the server's link address is %s, not wss://: the device token would travel in clear text on every link. The server's public URL is not its https:// address: set it (simrelay serve --public-url https://...) and pair again; --allow-http for a local test server only", reg.WSURL))
	}
	salt := prev.Salt
	if salt == "" {
		salt = agent.NewSalt()
	}
	cfg := agent.ConfigFile{Server: *server, WSURL: reg.WSURL, DeviceToken: reg.DeviceToken,
		DeviceFingerprint: *fingerprint, DeviceName: *name, Salt: salt}
	if err := agent.SaveConfig(*config, cfg); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "paired as %s; configuration in %s\nstart it with: simrelay-agent run --config %s\n", *fingerprint, *config, *config)
	return 0
}

// pairClient is the HTTP client of the registration (tests trust their
// own TLS server with it).
var pairClient = func() *http.Client { return httpClient(30 * time.Second) }

// maxNameBytes is the server's limit of device_name (PROTOCOL.md 4.5).
const maxNameBytes = 100

// cutName cuts a name to n bytes on a character boundary: a character
// cut in two is no UTF-8, which goes to the server as U+FFFD (three bytes),
// past the limit.
func cutName(name string, n int) string {
	for len(name) > n {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

var notFingerprint = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// newFingerprint is agent-<host>-<random>: readable in the console, and
// unique even for two devices with the same host name ("localhost" is
// what Termux reports).
func newFingerprint(host string) string {
	slug := strings.Trim(notFingerprint.ReplaceAllString(strings.ToLower(host), "-"), "-")
	if len(slug) > 40 {
		slug = slug[:40]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	if slug == "" {
		return "agent-" + hex.EncodeToString(b)
	}
	return "agent-" + slug + "-" + hex.EncodeToString(b)
}
