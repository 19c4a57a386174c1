package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url          string
		allowPrivate bool
		wantErr      string // "" means accepted
	}{
		{"https://hooks.example.com/sms", false, ""},
		{"https://hooks.example.com:8443/sms?x=1", false, ""},
		{"https://hooks.example.com:65536/sms", false, "invalid port"},
		{"https://hooks.example.com:0/sms", false, "invalid port"},
		{"  https://hooks.example.com/sms  ", false, ""},
		{"https://8.8.8.8/hook", false, ""},
		{"https://[2606:4700:4700::1111]/hook", false, ""},
		{"", false, "is required"},
		{"hooks.example.com/sms", false, "absolute URL"},
		{"/sms", false, "absolute URL"},
		{"ftp://hooks.example.com/", false, "must be an https URL"},
		// With --webhook-allow-private http is accepted too: the error says so.
		{"ftp://hooks.example.com/", true, "must be an https or http URL"},
		{"http://hooks.example.com/sms", false, "must use https"},
		{"http://hooks.example.com/sms", true, ""},
		{"mailto:ops@example.com", false, "absolute URL"},
		{"https://localhost/hook", false, "localhost"},
		{"https://LOCALHOST./hook", false, "localhost"},
		{"https://api.localhost/hook", false, "localhost"},
		{"https://127.0.0.1/hook", false, "loopback"},
		{"https://127.0.0.1:8443/hook", true, ""},
		{"http://127.0.0.1:8080/hook", true, ""},
		{"https://10.0.0.5/hook", false, "private"},
		{"https://192.168.1.10/hook", false, "private"},
		{"https://172.20.0.1/hook", false, "private"},
		{"https://169.254.169.254/latest/meta-data", false, "link-local"},
		{"https://100.64.1.1/hook", false, "carrier-grade NAT"},
		{"https://224.0.0.1/hook", false, "multicast"},
		{"https://0.0.0.0/hook", false, "this-network"},
		{"https://[::1]/hook", false, "loopback"},
		{"https://[::]/hook", false, "unspecified"},
		{"https://[::ffff:127.0.0.1]/hook", false, "loopback"},
		{"https://[::ffff:a9fe:a9fe]/hook", false, "link-local"},
		{"https://[fe80::1%25eth0]/hook", false, "link-local"},
		{"https://[fd00::1]/hook", false, "private"},
		{"https://127.1/hook", false, "DNS name"},
		{"https://2130706433/hook", false, "DNS name"},
		{"https://0x7f.0x1/hook", false, "DNS name"},
		{"https://hooks.example.com:0/", false, "port"},
		{"https://" + strings.Repeat("a", 2100) + ".com/", false, "at most"},
	}
	for _, tt := range tests {
		_, err := CheckURL(tt.url, tt.allowPrivate)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckURL(%q, %v): got %v, want it accepted", tt.url, tt.allowPrivate, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("CheckURL(%q, %v): accepted, want an error containing %q", tt.url, tt.allowPrivate, tt.wantErr)
		case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("CheckURL(%q, %v): got %q, want it to contain %q", tt.url, tt.allowPrivate, err, tt.wantErr)
		}
	}
}

// The client refuses non-public addresses at connect time, after DNS: a
// name (localhost) that resolves to loopback reaches nothing.
func TestClientRefusesPrivateAddressesAtConnect(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, false, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	client := NewClient(Config{Timeout: 5 * time.Second})
	for _, target := range []string{
		"http://localhost:" + port + "/hook",
		"http://127.0.0.1:" + port + "/hook",
		"http://[::ffff:127.0.0.1]:" + port + "/hook",
		"http://[::1]:" + port + "/hook",
		"http://169.254.169.254/latest/meta-data",
		"http://0.0.0.0:" + port + "/hook",
	} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, target, strings.NewReader("{}"))
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
			t.Errorf("%s: got status %d, want the connection refused", target, res.StatusCode)
			continue
		}
		if !errors.Is(err, egress.ErrNonPublic) {
			t.Errorf("%s: got %v, want egress.ErrNonPublic", target, err)
		}
	}
	if n := len(rc.Requests()); n != 0 {
		t.Fatalf("the loopback receiver got %d requests, want 0", n)
	}

	// With private addresses allowed, the same name reaches it.
	res, err := NewClient(Config{AllowPrivate: true}).Post("http://localhost:"+port+"/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || len(rc.Requests()) != 1 {
		t.Fatalf("allow-private: got status %d and %d requests, want 204 and 1", res.StatusCode, len(rc.Requests()))
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, w http.ResponseWriter) int {
		if r.URL.Path == "/hook" {
			w.Header().Set("Location", "/elsewhere")
			return http.StatusFound
		}
		return http.StatusOK
	})
	res, err := NewClient(Config{AllowPrivate: true, RootCAs: rc.Pool()}).Post(rc.URL+"/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		t.Fatalf("got status %d, want the 302 itself", res.StatusCode)
	}
	if got := rc.Requests(); len(got) != 1 || got[0].Path != "/hook" {
		t.Fatalf("got requests %v, want only /hook", got)
	}
}

func TestClientVerifiesTLS(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	if _, err := NewClient(Config{AllowPrivate: true}).Post(rc.URL, "application/json", strings.NewReader("{}")); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
	res, err := NewClient(Config{AllowPrivate: true, RootCAs: rc.Pool()}).Post(rc.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("with the receiver's certificate trusted: %v", err)
	}
	res.Body.Close()
}

// The client never uses a proxy from the environment: a proxy would dial for
// it, past the address check. (Go never proxies loopback requests, so a test
// receiver cannot show this; the transport's setting can.)
func TestClientHasNoProxy(t *testing.T) {
	t.Parallel()
	tr, ok := NewClient(Config{}).Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("got transport %T with a proxy function, want an *http.Transport without one", NewClient(Config{}).Transport)
	}
}

// Run closes the connections its attempts left open for reuse when it
// returns: each held a socket to the receiver and two goroutines of the
// transport for the idle timeout (90 s) after the deliveries had stopped.
func TestRunClosesItsIdleConnectionsWhenItEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var mu sync.Mutex
	open := 0 // connections of the receiver not yet closed; guarded by mu
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	recv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open++
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	recv.Start()
	t.Cleanup(recv.Close)
	openNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return open
	}
	svc, stop := f.start(Config{AllowPrivate: true, Timeout: 5 * time.Second}, nil)
	f.configure(svc, EntryInput{URL: recv.URL + "/hook"})
	f.inbound(svc, f.device, "SIM1", time.Now())
	eventually(t, "the delivery made", func() bool {
		lines := f.lines()
		return len(lines) == 1 && lines[0].State == store.WebhookDelivered
	})
	if n := openNow(); n != 1 {
		t.Fatalf("%d connections open to the receiver after the delivery, want the one kept for reuse", n)
	}
	stop()
	eventually(t, "the idle connection closed once Run returned", func() bool { return openNow() == 0 })
}
