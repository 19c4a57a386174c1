package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/syncbuf"
)

const (
	tokenServer = "http://127.0.0.1:8080"
	tokenFP     = "virtual-phone"
)

// FuzzPhoneTokenFile reads fuzzed bytes as the virtual phone's token file
// (torn JSON, garbage, NUL, bytes that are not UTF-8, a token or address
// that no registration hands out): nothing panics; a file read as the
// phone's holds a token that can go in an HTTP header and a ws:// or
// wss:// address, so the link is never retried forever with a request
// that cannot be made; anything else that is not the phone's is either
// "none" or an error naming the file as damaged.
func FuzzPhoneTokenFile(f *testing.F) {
	whole, _ := json.Marshal(savedPhone{Server: tokenServer, Fingerprint: tokenFP, DeviceToken: "dt_" + strings.Repeat("A", 43), WSURL: "ws://127.0.0.1:8080/device/ws"})
	for _, s := range []string{
		string(whole), string(whole[:len(whole)-3]), string(whole) + "\n{", "", "\x00", "null", "[]", "\xff\xfe{}",
		strings.Replace(string(whole), "dt_", "dt_\\u0000", 1), strings.Replace(string(whole), "dt_", "dt_\\n", 1),
		strings.Replace(string(whole), "dt_", "sk_", 1), strings.Replace(string(whole), "ws://", "http://", 1),
		strings.Replace(string(whole), "ws://", "ws://\\u0000", 1), strings.Replace(string(whole), `"dt_`, `"dt_\xff`, 1),
		`{"server":"` + tokenServer + `","device_fingerprint":"` + tokenFP + `","device_token":"dt_a","ws_url":"ws:///x"}`,
		strings.Repeat(" ", 70000) + string(whole),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "phone.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		saved, ok, err := loadPhoneToken(path, tokenServer, tokenFP)
		switch {
		case err != nil:
			if ok || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "damaged") {
				t.Fatalf("%q: ok %v, error %q; want not ok and an error naming the file as damaged", data, ok, err)
			}
		case ok:
			if !httpguts.ValidHeaderFieldValue("Bearer " + saved.DeviceToken) {
				t.Fatalf("%q: token %q cannot go in a header", data, saved.DeviceToken)
			}
			if u, err := url.Parse(saved.WSURL); err != nil || u.Scheme != "ws" && u.Scheme != "wss" || u.Host == "" {
				t.Fatalf("%q: ws_url %q", data, saved.WSURL)
			}
		}
	})
}

// A damaged token file is named as such: with nothing to pair with, the
// phone stops saying so; with an API key it says so and pairs again.
func TestVirtualPhoneDamagedTokenFile(t *testing.T) {
	t.Parallel()
	addr := freeport.Addr(t) // nothing listens there
	server := "http://" + addr
	path := filepath.Join(t.TempDir(), "phone.json")
	whole, _ := json.Marshal(savedPhone{Server: server, Fingerprint: tokenFP, DeviceToken: "dt_" + strings.Repeat("A", 43), WSURL: "ws://" + addr + "/device/ws"})
	if err := os.WriteFile(path, whole[:len(whole)/2], 0o600); err != nil { // torn
		t.Fatal(err)
	}
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	if code := run(context.Background(), []string{"phone", "--server", server, "--token-file", path}, stdout, stderr); code != 2 ||
		!strings.Contains(stderr.String(), "token file "+path+" is damaged") {
		t.Fatalf("no way to pair: exit %d, stderr %q; want 2 and the file named as damaged", code, stderr.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"phone", "--server", server, "--api-key", "sk_" + strings.Repeat("a", 32), "--token-file", path}, stdout, stderr)
	}()
	waitOutput(t, stdout, "token file "+path+" is damaged")
	waitOutput(t, stdout, "pairing again")
	waitOutput(t, stdout, "waiting for the server at "+server)
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("stopped while waiting: exit %d, stderr %q", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the phone did not stop within 10 s of its context ending")
	}
}
