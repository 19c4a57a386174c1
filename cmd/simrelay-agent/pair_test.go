package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/simrelay/simrelay/agent"
)

// registrar is a server's POST /device/register: it keeps the body it was
// sent and answers status and body.
type registrar struct {
	mu     sync.Mutex
	got    map[string]any
	status int
	body   string
	// simrelayNotFound answers another path as a simrelay server does,
	// 404 with the contract's error body, rather than a plain 404 page.
	simrelayNotFound bool
}

func (r *registrar) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/device/register" {
		if r.simrelayNotFound {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"not_found","message":"There is no route POST ` + req.URL.Path + `."}`))
			return
		}
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = json.NewDecoder(req.Body).Decode(&r.got)
	w.WriteHeader(r.status)
	_, _ = w.Write([]byte(r.body))
}

func pairWith(t *testing.T, r *registrar, server string, extra ...string) (code int, config, stderr string) {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	config = filepath.Join(t.TempDir(), "agent.json")
	var errOut bytes.Buffer
	args := append([]string{"pair", "--server", srv.URL + server, "--code", "K7QX3MZP", "--config", config, "--allow-http"}, extra...)
	code = run(t.Context(), args, &bytes.Buffer{}, &errOut)
	return code, config, errOut.String()
}

// A --name over the server's 100 bytes is cut on a character boundary: cut
// inside a character, it went as U+FFFD, 102 bytes, and the server refused
// the pairing.
func TestPairCutsALongNameOnACharacter(t *testing.T) {
	t.Parallel()
	r := &registrar{status: http.StatusCreated, body: `{"device_token":"dt_abc","ws_url":"ws://127.0.0.1:1/device/ws"}`}
	name := strings.Repeat("a", 99) + "é" + "b"
	code, _, stderr := pairWith(t, r, "", "--name", name)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r.mu.Lock()
	sent, _ := r.got["device_name"].(string)
	r.mu.Unlock()
	if sent != strings.Repeat("a", 99) || !utf8.ValidString(sent) {
		t.Fatalf("device_name %q (%d bytes); want the 99 a's before the cut character", sent, len(sent))
	}
}

// A --server that is no simrelay server (a web site, a wrong path, one
// under a simrelay server that answers its own 404) is said
// to be one, naming --server, rather than "404 http_404: 404 Not Found";
// a registration without a usable token or link address is not written.
func TestPairNamesAServerThatIsNotSimrelay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		r      *registrar
		server string
	}{
		{"a wrong path", &registrar{status: http.StatusCreated, body: `{"device_token":"dt_abc","ws_url":"ws://127.0.0.1:1/device/ws"}`}, "/console"},
		{"a wrong path on a simrelay server", &registrar{status: http.StatusCreated, body: `{"device_token":"dt_abc","ws_url":"ws://127.0.0.1:1/device/ws"}`, simrelayNotFound: true}, "/console"},
		{"a web page", &registrar{status: http.StatusOK, body: "<html>welcome</html>"}, ""},
		{"no device token", &registrar{status: http.StatusCreated, body: `{"id":7}`}, ""},
	} {
		code, config, stderr := pairWith(t, c.r, c.server)
		if code != 1 || !strings.Contains(stderr, "check --server") {
			t.Errorf("%s: exit %d, %q; want 1 naming --server", c.name, code, stderr)
		}
		if _, err := os.Stat(config); err == nil {
			t.Errorf("%s: a configuration was written", c.name)
		}
	}
}

// A server reached over https:// whose link address is ws:// (its public
// URL left at http://, behind a TLS proxy) would have the device token
// cross the network in clear text on every link: pair refuses it and
// writes nothing, as it refuses an http:// --server. (Not parallel: it
// makes the registration trust its TLS server.)
func TestPairRefusesAPlainLinkAddress(t *testing.T) {
	r := &registrar{status: http.StatusCreated, body: `{"device_token":"dt_abc","ws_url":"ws://127.0.0.1:8080/device/ws"}`}
	srv := httptest.NewTLSServer(r)
	t.Cleanup(srv.Close)
	was := pairClient
	pairClient = srv.Client
	t.Cleanup(func() { pairClient = was })
	config := filepath.Join(t.TempDir(), "agent.json")
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"pair", "--server", srv.URL, "--code", "K7QX3MZP", "--config", config}, &bytes.Buffer{}, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "clear text") || !strings.Contains(errOut.String(), "--public-url") {
		t.Fatalf("exit %d, %q; want 1 saying the token would travel in clear text", code, errOut.String())
	}
	if _, err := os.Stat(config); err == nil {
		t.Fatal("a configuration was written")
	}
	r.mu.Lock()
	r.body = `{"device_token":"dt_abc","ws_url":"wss://127.0.0.1:8443/device/ws"}`
	r.mu.Unlock()
	if code := run(t.Context(), []string{"pair", "--server", srv.URL, "--code", "K7QX3MZP", "--config", config}, &bytes.Buffer{}, &errOut); code != 0 {
		t.Fatalf("a wss:// link address: exit %d, %q", code, errOut.String())
	}
}

// A configuration paired before pair refused a ws:// link address of an
// https:// server is warned about at each start: its token crosses the
// network in clear text on every link.
func TestRunWarnsOfAPlainLinkAddress(t *testing.T) {
	t.Parallel()
	agentPath, _ := binaries(t)
	fake := fakeTermux(t)
	config := filepath.Join(t.TempDir(), "agent.json")
	if err := agent.SaveConfig(config, agent.ConfigFile{Server: "https://127.0.0.1:1", WSURL: "ws://127.0.0.1:1/device/ws", DeviceToken: "dt_x", Salt: "s1"}); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, agentPath, fake, "--transport", "termux", "--sims", "SIM1", "--config", config)
	until(t, "the warning of a ws:// link address", func() bool { return strings.Contains(p.stderr.String(), "crosses the network in clear text") })
}
