package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// TestVirtualPhone walks the README: a server, a company, the virtual phone
// paired with the API key and carrying one inbound SMS, then a send that the
// phone reports delivered.
func TestVirtualPhone(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st)

	phone := exec.Command(bin, "phone", "--server", srv.url, "--api-key", apiKey, "--token-file", filepath.Join(t.TempDir(), "phone.json"),
		"--name", "Desk phone 2", "--battery", "12", "--charging", "--network", "lte", "--inbound", "+15551234567", "hello from the phone")
	stdout := &syncbuf.Buffer{}
	phone.Stdout, phone.Stderr = stdout, stdout
	if err := phone.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phone.Process.Kill(); _ = phone.Wait() })
	waitOutput(t, stdout, "inbound from +15551234567 stored as message")

	if code, body := get(t, srv.url+"/automation/latest-sms", apiKey); code != 200 || !strings.Contains(string(body), "hello from the phone") {
		t.Fatalf("latest-sms: got %d %s", code, body)
	}
	// The health flags reach the device list through the hello.
	if code, body := get(t, srv.url+"/device/list", apiKey); code != 200 ||
		!strings.Contains(string(body), `"health":{"battery":12,"charging":true,"signal":null,"network":"lte","sims":[],"battery_low":true,`) {
		t.Errorf("device list: got %d %s, want the phone's health", code, body)
	}
	// --name is the name it registers with, which the device list shows.
	if code, body := get(t, srv.url+"/device/list", apiKey); code != 200 || !strings.Contains(string(body), `"device_name":"Desk phone 2"`) {
		t.Errorf("device list: got %d %s, want the phone named Desk phone 2", code, body)
	}
	// A health flag the server would refuse is refused before anything is sent.
	out, err := exec.Command(bin, "phone", "--server", srv.url, "--token", "dt_x", "--battery", "101").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--battery must be a percentage from 0 to 100") {
		t.Errorf("--battery 101: got %v, %s; want exit status 2 naming the flag", err, out)
	}
	req, _ := http.NewRequest("POST", srv.url+"/chat/send", strings.NewReader(`{"device_fingerprint":"virtual-phone","phone":"+15557654321","message":"hi there","sim_slot":"SIM1"}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct{ QueueID string }
	_ = json.NewDecoder(res.Body).Decode(&sent)
	res.Body.Close()
	waitOutput(t, stdout, "job "+sent.QueueID+": reported sent, then delivered")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, srv.url+"/chat/queue/"+sent.QueueID, apiKey)
		if strings.Contains(string(body), `"status":"delivered"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the send never showed delivered: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitOutput(t *testing.T, b *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output:\n%s", want, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The virtual phone keeps its device token, as an app does: a second start
// links with the saved token and does not register again, so restarts do
// not spend the authentication rate limit (15 per 15 minutes per IP) that
// pairing new phones needs. It says in one line why a link ended and when
// it waits for a server that does not answer.
func TestVirtualPhoneKeepsItsToken(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st)
	tokenFile := filepath.Join(t.TempDir(), "phones", "virtual-phone.json")
	// authRemaining spends one request of the authentication scope and
	// returns what is left of it.
	authRemaining := func() int {
		t.Helper()
		res, err := testhttp.Client.Post(srv.url+"/device/register", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		n, err := strconv.Atoi(res.Header.Get("RateLimit-Remaining"))
		if res.StatusCode != http.StatusBadRequest || err != nil {
			t.Fatalf("probe: got %d with RateLimit-Remaining %q", res.StatusCode, res.Header.Get("RateLimit-Remaining"))
		}
		return n
	}
	start := func() (*exec.Cmd, *syncbuf.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, "phone", "--server", srv.url, "--api-key", apiKey, "--token-file", tokenFile)
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitOutput(t, out, "connected")
		return cmd, out
	}
	stop := func(cmd *exec.Cmd) {
		t.Helper()
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the phone did not stop cleanly on Ctrl-C: %v", err)
		}
	}

	first, out := start()
	if want := "paired as virtual-phone; device token saved in " + tokenFile; !strings.Contains(out.String(), want) {
		t.Fatalf("first start: no %q in:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "dt_") {
		t.Fatalf("the token was printed:\n%s", out.String())
	}
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: got %v %v, want mode 0600", fi, err)
	}
	before := authRemaining()
	stop(first)

	second, out := start()
	if want := "using the device token of virtual-phone saved in " + tokenFile; !strings.Contains(out.String(), want) {
		t.Fatalf("second start: no %q in:\n%s", want, out.String())
	}
	if got := authRemaining(); got != before-1 {
		t.Fatalf("auth scope: %d left after the second start, want %d (the probe only): the phone registered again", got, before-1)
	}

	// The server stops: the phone says why its link ended, then that it
	// waits for the server.
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, "link closed: 4012 server restarting; reconnecting in ")
	waitOutput(t, out, "waiting for the server at "+srv.url+": connection refused; retrying in ")
	stop(second)
	t.Logf("the phone's output:\n%s", out.String())
}

// The virtual phone started before its server answers waits for it,
// pairing included, as the README says, and pairs once the server is up.
//
// The server answers at the phone's address through a relay the test opens
// once the phone has been refused: started there itself, the server took
// from well under a second to many on a busy machine to listen, and the
// phone, doubling its wait each time it was refused (1 s, 2 s, 4 s ... 30
// s), paired up to as long again after it, 2 to 39 s in all. The server
// is up before the phone starts, so the phone's next try after the relay
// opens is a second away (or the next, two more), whatever the load.
func TestVirtualPhoneWaitsForTheServerToPair(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st)
	addr := freeport.Addr(t) // nothing listens there until the relay opens
	cmd := exec.Command(bin, "phone", "--server", "http://"+addr, "--api-key", apiKey, "--token-file", filepath.Join(t.TempDir(), "phone.json"))
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitOutput(t, out, "waiting for the server at http://"+addr+": connection refused; retrying in 1s")
	relayTo(t, addr, strings.TrimPrefix(srv.url, "http://"))
	waitOutput(t, out, "paired as virtual-phone")
}

// relayTo listens on addr and relays every connection to the server at
// to, byte for byte, until the test ends.
func relayTo(t *testing.T, addr, to string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			for _, p := range [][2]net.Conn{{c, s}, {s, c}} {
				wg.Go(func() {
					_, _ = io.Copy(p[0], p[1])
					p[0].Close()
					p[1].Close()
				})
			}
		}
	})
}

// Ctrl-C while the phone waits for a server is how a person stops it: it
// exits 0 and prints no error.
func TestVirtualPhoneStopsQuietlyWhileWaiting(t *testing.T) {
	t.Parallel()
	addr := freeport.Addr(t) // nothing listens there
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"phone", "--server", "http://" + addr, "--api-key", "sk_" + strings.Repeat("a", 32),
			"--token-file", filepath.Join(t.TempDir(), "phone.json")}, stdout, stderr)
	}()
	waitOutput(t, stdout, "waiting for the server at http://"+addr)
	cancel()
	select {
	case c := <-code:
		if c != 0 || stderr.String() != "" {
			t.Fatalf("stopped while waiting: exit %d, stderr %q; want 0 and nothing", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the phone did not stop within 10 s of its context ending")
	}
}

// A link the server refused is one line that reads as one: the server's
// message, whose sentence ends with a full stop, is not followed by
// "; retrying" after that stop.
func TestRetryLineOfARefusal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  *client.APIError
		want string
	}{
		{&client.APIError{Status: 503, Code: "unavailable", Message: "The server cannot reach its database; connect again shortly."},
			"the server refused the link: 503 unavailable: The server cannot reach its database; connect again shortly; retrying in 3s"},
		{&client.APIError{Status: 503, Code: "unavailable", Message: "The server is restarting; connect again shortly. "},
			"the server refused the link: 503 unavailable: The server is restarting; connect again shortly; retrying in 3s"},
		{&client.APIError{Status: 429, Code: "rate_limited", Message: "Too many links"},
			"the server refused the link: 429 rate_limited: Too many links; retrying in 3s"},
		{&client.APIError{Status: 403, Code: "device_disabled", Message: "Disabled?"},
			"the server refused the link: 403 device_disabled: Disabled?; retrying in 3s"},
		{&client.APIError{Status: 502, Code: "", Message: ""},
			"the server refused the link: 502; retrying in 3s"},
	} {
		if got := retryLine("http://127.0.0.1:8080", fmt.Errorf("link: %w", c.err), 3*time.Second); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", *c.err, got, c.want)
		}
	}
}

// What the flags put in the hello is checked at start, as the server checks
// it (PROTOCOL.md section 4): the phone paired, then was refused
// invalid_hello at every reconnect, forever. No server is needed: the
// phone stops before it pairs. The deadline only ends a phone that does not.
func TestPhoneChecksItsHelloFirst(t *testing.T) {
	t.Parallel()
	tokens := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--selected-sim", "sim1"}, `--selected-sim "sim1": want SIM1, SIM2 or BOTH`},
		{[]string{"--whatsapp", "+15550001111", "--whatsapp", "bogus"}, `--whatsapp "bogus": want an E.164 number, such as +15550001111`},
		{[]string{"--imessage", "not a handle"}, `--imessage "not a handle": want an E.164 number or an e-mail address`},
		{[]string{"--imessage", "-me@example.com"}, `--imessage "-me@example.com": `},
		{[]string{"--whatsapp", strings.Repeat("+15550001111,", 21)}, "--whatsapp: at most 20, not 21"},
		// The fingerprint the registration would refuse, after a pairing code was made for it.
		{[]string{"--fingerprint", "."}, `--fingerprint must not be . or ..`},
		{[]string{"--fingerprint", "a/b"}, `--fingerprint must be 1 to 128 letters, digits, dots, dashes, underscores or colons`},
		{[]string{"--battery", "-2"}, `--battery -2: want a percent, 0-100, or -1 for none`},
		{[]string{"--signal", "-5"}, `--signal -5: want a percent, 0-100, or -1 for none`},
		// A name is held to the rules of a device's rename: the register
		// frame's 100 bytes, a visible character, no line break.
		{[]string{"--name", strings.Repeat("é", 51)}, `--name must be 1 to 100 bytes of UTF-8`},
		{[]string{"--name", " \u200b "}, `--name must hold a visible character`},
		{[]string{"--name", "Desk\nphone"}, `--name must not contain line breaks, tabs or other control characters`},
		{[]string{"--name", "Desk\xffphone"}, `--name must be 1 to 100 bytes of UTF-8`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var stdout, stderr bytes.Buffer
		args := append([]string{"--server", "http://127.0.0.1:1", "--api-key", "sk_x", "--token-file", filepath.Join(tokens, "t.json")}, c.args...)
		code := phoneCmd(ctx, args, &stdout, &stderr)
		cancel()
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("phone %v: exit %d, stderr %q, stdout %q; want 2 and %q", c.args, code, stderr.String(), stdout.String(), c.want)
		}
	}
	// What the server takes is taken: an e-mail handle, E.164 numbers, no SIM named.
	if err := helloFault(phoneConfig{whatsapp: stringList{"+15550001111"}, imessage: stringList{"me@example.com", "+15550002222"}}); err != nil {
		t.Errorf("a valid hello: %v", err)
	}
}

// A token refused by the link the server named just after it handed the
// token out is no dead token: the server's ws_url leads elsewhere (a
// --public-url naming another server, a port another process holds). The
// phone stops saying so after one pairing; it paired again at once, each
// time spending the authentication rate limit, until that answered 429.
func TestVirtualPhoneStopsWhenItsNewTokenIsRefused(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	elsewhere := startServer(t, bin, newTestStore(t))
	srv := startServer(t, bin, st, "--public-url", elsewhere.url)

	phone := exec.Command(bin, "phone", "--server", srv.url, "--api-key", apiKey, "--token-file", filepath.Join(t.TempDir(), "phone.json"))
	out := &syncbuf.Buffer{}
	phone.Stdout, phone.Stderr = out, out
	if err := phone.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phone.Process.Kill(); _ = phone.Wait() })
	ended := make(chan error, 1)
	go func() { ended <- phone.Wait() }()
	select {
	case err := <-ended:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("got %v, want exit status 1; output:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the phone still runs after 30 s; output:\n%s", out.String())
	}
	if n := strings.Count(out.String(), "paired as"); n != 1 {
		t.Errorf("paired %d times, want once; output:\n%s", n, out.String())
	}
	for _, want := range []string{"ws" + strings.TrimPrefix(elsewhere.url, "http") + "/device/ws", "--public-url"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, out.String())
		}
	}
}
