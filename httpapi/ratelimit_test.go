package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
)

// limitHeaders returns RateLimit-Limit, -Remaining and -Reset.
func limitHeaders(t *testing.T, r resp) (limit, remaining, reset int) {
	t.Helper()
	vals := make([]int, 3)
	for i, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		v, err := strconv.Atoi(r.Header.Get(h))
		if err != nil {
			t.Fatalf("%s header %q on a %d answer", h, r.Header.Get(h), r.Status)
		}
		vals[i] = v
	}
	return vals[0], vals[1], vals[2]
}

func TestGeneralLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.newCompany("Acme", "owner@acme.test")

	// The API key is its own identity with a fresh window; the clock stands still,
	// so Reset is exactly the window.
	for i := 1; i <= 100; i++ {
		path := "/company"
		if i%10 == 0 {
			path = "/no/such/route" // unknown routes count for the credential too
		}
		r := e.do(call{method: "GET", path: path, token: c.apiKey})
		limit, remaining, reset := limitHeaders(t, r)
		if limit != 100 || remaining != 100-i || reset != 60 {
			t.Fatalf("request %d: got limit %d remaining %d reset %d, want 100 %d 60", i, limit, remaining, reset, 100-i)
		}
	}
	r := e.do(call{method: "GET", path: "/company", token: c.apiKey})
	e.want(r, http.StatusTooManyRequests, "rate_limited")
	if limit, remaining, reset := limitHeaders(t, r); limit != 100 || remaining != 0 || reset != 60 {
		t.Fatalf("101st: got %d %d %d, want 100 0 60", limit, remaining, reset)
	}
	if got := r.Header.Get("Retry-After"); got != "60" {
		t.Fatalf("Retry-After: got %q, want 60", got)
	}
	if got, want := r.str("message"), "Too many requests: the limit is 100 in this window. Retry after 60 seconds."; got != want {
		t.Fatalf("message: got %q, want %q", got, want)
	}

	// Another identity is not affected: the admin's access token counts apart.
	e.want(e.do(call{method: "GET", path: "/company", token: c.access}), http.StatusOK, "")

	// The window ends 60 s after its first request.
	e.clock.Advance(30 * time.Second)
	r = e.do(call{method: "GET", path: "/company", token: c.apiKey})
	if _, _, reset := limitHeaders(t, r); r.Status != http.StatusTooManyRequests || reset != 30 {
		t.Fatalf("half-way: got %d reset %d, want 429 reset 30", r.Status, reset)
	}
	e.clock.Advance(29 * time.Second)
	r = e.do(call{method: "GET", path: "/company", token: c.apiKey})
	if got, want := r.str("message"), "Too many requests: the limit is 100 in this window. Retry after 1 second."; r.Status != http.StatusTooManyRequests || got != want {
		t.Fatalf("a second before the end: got %d %q, want 429 %q", r.Status, got, want)
	}
	e.clock.Advance(time.Second)
	r = e.do(call{method: "GET", path: "/company", token: c.apiKey})
	e.want(r, http.StatusOK, "")
	if _, remaining, _ := limitHeaders(t, r); remaining != 99 {
		t.Fatalf("new window: got remaining %d, want 99", remaining)
	}
}

func TestHeadersOnEveryCountedAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []call{
		{method: "GET", path: "/company"},                     // 401: no credential
		{method: "GET", path: "/company", token: "sk_bogus"},  // 401: bad credential, counted by IP
		{method: "GET", path: "/nowhere"},                     // 404
		{method: "DELETE", path: "/company", token: "sk_bad"}, // 405
	} {
		r := e.do(c)
		if r.Status < 400 || r.Header.Get("RateLimit-Limit") == "" || r.Header.Get("RateLimit-Remaining") == "" || r.Header.Get("RateLimit-Reset") == "" {
			t.Errorf("%s %s: got %d with headers %v, want an error carrying RateLimit-*", c.method, c.path, r.Status, r.Header)
		}
	}
	// The four requests above share the client IP's window.
	r := e.do(call{method: "GET", path: "/nowhere"})
	if _, remaining, _ := limitHeaders(t, r); remaining != 95 {
		t.Errorf("got remaining %d, want 95 after five requests from one IP", remaining)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		r := e.do(call{method: "GET", path: path})
		if r.Status != http.StatusOK || r.Header.Get("RateLimit-Limit") != "" {
			t.Errorf("%s: got %d with RateLimit-Limit %q, want 200 and no limit headers", path, r.Status, r.Header.Get("RateLimit-Limit"))
		}
	}
}

func TestAuthLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Each try names another address, so that the client address's window
	// refuses, not an e-mail address's failed logins (--rate-login).
	login := func(i int) call {
		return call{method: "POST", path: "/auth/login", body: map[string]any{"email": fmt.Sprintf("nobody%d@acme.test", i), "password": "Whatever-123"}}
	}
	for i := 1; i <= 15; i++ {
		r := e.do(login(i))
		e.want(r, http.StatusUnauthorized, "invalid_credentials")
		// The auth scope is nearer exhaustion than the general one, so its numbers show.
		if limit, remaining, reset := limitHeaders(t, r); limit != 15 || remaining != 15-i || reset != 900 {
			t.Fatalf("attempt %d: got %d %d %d, want 15 %d 900", i, limit, remaining, reset, 15-i)
		}
	}
	r := e.do(login(16))
	e.want(r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") != "900" {
		t.Fatalf("Retry-After: got %q, want 900", r.Header.Get("Retry-After"))
	}
	// Every route of the scope shares the window.
	e.want(e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": "a@b.co"}}), http.StatusTooManyRequests, "rate_limited")
	// Other routes still answer: the general window has room.
	e.want(e.do(call{method: "GET", path: "/company"}), http.StatusUnauthorized, "unauthorized")
}

func TestForgedForwardedForChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 1; i <= 16; i++ {
		r := e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": "a@b.co"},
			header: map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i), "X-Real-IP": fmt.Sprintf("198.51.100.%d", i)}})
		want := http.StatusOK
		if i == 16 {
			want = http.StatusTooManyRequests
		}
		if r.Status != want {
			t.Fatalf("request %d with a forged X-Forwarded-For: got %d, want %d", i, r.Status, want)
		}
	}
}

func TestTrustedProxyForwardedFor(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	e := newEnv(t, func(c *httpapi.Config) { c.TrustedProxies = []*net.IPNet{loopback} })
	forgot := func(ip string) resp {
		return e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": "a@b.co"},
			header: map[string]string{"X-Forwarded-For": ip}})
	}
	// Behind a trusted proxy each forwarded client has its own window.
	for i := 1; i <= 20; i++ {
		r := forgot(fmt.Sprintf("203.0.113.%d", i))
		if _, remaining, _ := limitHeaders(t, r); r.Status != http.StatusOK || remaining != 14 {
			t.Fatalf("client %d: got %d remaining %d, want 200 and 14", i, r.Status, remaining)
		}
	}
	for i := 1; i <= 15; i++ {
		forgot("198.51.100.7")
	}
	e.want(forgot("198.51.100.7"), http.StatusTooManyRequests, "rate_limited")
}

// An IPv6 client picks any address of its /64: the whole /64 is one client
// for the limits, so fresh addresses buy no fresh windows.
func TestIPv6ClientIsItsSlash64(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	e := newEnv(t, func(c *httpapi.Config) { c.TrustedProxies = []*net.IPNet{loopback} })
	forgot := func(ip string) resp {
		return e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": "a@b.co"},
			header: map[string]string{"X-Forwarded-For": ip}})
	}
	for i := 1; i <= 15; i++ {
		if r := forgot(fmt.Sprintf("2001:db8:1:2::%x", i)); r.Status != http.StatusOK {
			t.Fatalf("request %d: got %d, want 200", i, r.Status)
		}
	}
	e.want(forgot("2001:db8:1:2:dead:beef:0:1"), http.StatusTooManyRequests, "rate_limited")
	// The next /64 is another client.
	if r := forgot("2001:db8:1:3::1"); r.Status != http.StatusOK {
		t.Fatalf("another /64: got %d, want 200", r.Status)
	}
}

// Addresses fill the capped map and then share its overflow window; a
// request with a credential keeps a window of its own all the same, so a
// flood of fresh addresses cannot throttle a company's API key.
func TestAddressFloodLeavesCredentialsTheirOwnWindow(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	e := newEnv(t, func(c *httpapi.Config) {
		c.TrustedProxies = []*net.IPNet{loopback}
		c.MaxAddresses = 32
	})
	acme := e.newCompany("Acme", "ana@acme.test")
	anonymous := func(i int) resp {
		return e.do(call{method: "GET", path: "/company", header: map[string]string{"X-Forwarded-For": fmt.Sprintf("2001:db8:%x::1", i)}})
	}
	for i := range 300 {
		anonymous(i)
	}
	e.want(anonymous(1000), http.StatusTooManyRequests, "rate_limited")
	r := e.do(call{method: "GET", path: "/company", token: acme.apiKey, header: map[string]string{"X-Forwarded-For": "2001:db8:ffff::1"}})
	e.want(r, http.StatusOK, "")
	if got := r.Header.Get("RateLimit-Remaining"); got != "99" {
		t.Fatalf("the API key's first request: RateLimit-Remaining %s, want 99 (a window of its own)", got)
	}
}

// A browser's CORS preflights (OPTIONS without a credential) count in a
// window of their own: they spend neither the address's general window
// nor its credential tries, so a browser app's preflights never refuse
// its real requests; a flood of them is still refused once their own
// window is spent. An OPTIONS with a credential counts as any request of
// it does.
func TestPreflightsCountApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.newCompany("Acme", "owner@acme.test")
	preflight := func(path string) resp {
		t.Helper()
		return e.do(call{method: "OPTIONS", path: path, header: map[string]string{
			"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type"}})
	}
	// What the address has left of its windows (the company's making
	// spent some), read by a request of each.
	login := call{method: "POST", path: "/auth/login", body: map[string]any{"email": "nobody@acme.test", "password": "Whatever-123"}}
	r := e.do(login)
	e.want(r, http.StatusUnauthorized, "invalid_credentials")
	_, tries, _ := limitHeaders(t, r)
	r = e.do(call{method: "GET", path: "/company"})
	e.want(r, http.StatusUnauthorized, "unauthorized")
	_, general, _ := limitHeaders(t, r)
	paths := []string{"/chat/send", "/auth/login", "/company", "/no/such/route"}
	for i := 1; i <= 100; i++ {
		path := paths[i%len(paths)]
		r := preflight(path)
		want := http.StatusNoContent
		if path == "/no/such/route" {
			want = http.StatusNotFound
		}
		if r.Status != want {
			t.Fatalf("preflight %d of %s: got %d, want %d", i, path, r.Status, want)
		}
		if limit, remaining, _ := limitHeaders(t, r); limit != 100 || remaining != 100-i {
			t.Fatalf("preflight %d: got limit %d remaining %d, want 100 %d", i, limit, remaining, 100-i)
		}
	}
	// The address's general window and its credential tries are whole.
	r = e.do(call{method: "GET", path: "/company"})
	e.want(r, http.StatusUnauthorized, "unauthorized")
	if _, remaining, _ := limitHeaders(t, r); remaining != general-1 {
		t.Fatalf("general window after 100 preflights: remaining %d, want %d", remaining, general-1)
	}
	r = e.do(login)
	e.want(r, http.StatusUnauthorized, "invalid_credentials")
	if _, remaining, _ := limitHeaders(t, r); remaining != tries-1 {
		t.Fatalf("credential tries after 25 preflights of /auth/login: %d left, want %d", remaining, tries-1)
	}
	// Bounded: the 101st is refused.
	r = preflight("/chat/send")
	e.want(r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") != "60" {
		t.Fatalf("Retry-After %q, want 60", r.Header.Get("Retry-After"))
	}
	// An OPTIONS with a credential is no preflight: it counts under the
	// key, and with a bad one under the address's general window.
	r = e.do(call{method: "OPTIONS", path: "/chat/send", token: c.apiKey})
	if _, remaining, _ := limitHeaders(t, r); r.Status != http.StatusNoContent || remaining != 99 {
		t.Fatalf("OPTIONS with the API key: %d remaining %d, want 204 99", r.Status, remaining)
	}
	r = e.do(call{method: "OPTIONS", path: "/chat/send", token: "sk_bogus"})
	if _, remaining, _ := limitHeaders(t, r); remaining != general-3 {
		t.Fatalf("OPTIONS with a bad key: %d remaining %d, want the general window's %d", r.Status, remaining, general-3)
	}
}
