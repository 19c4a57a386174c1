package httpapi_test

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/httpapi"
)

// Routes FuzzRequestHeaders sends its headers to.
const (
	hdrSend          = iota // POST /chat/send, with the API key
	hdrMCP                  // POST /mcp (reads Content-Type and Accept itself)
	hdrPlans                // GET /plans, no credential: counted by the client's address
	hdrConsolePage          // GET /console/signin
	hdrConsoleSignIn        // POST /console/signin, a wrong password
	hdrRoutes
)

// FuzzRequestHeaders sends fuzzed Content-Type values (a line break
// between two values sends the header twice), Accept, Idempotency-Key,
// X-Forwarded-For, Origin and Cookie to routes that read them: a send,
// the MCP endpoint, a public route counted by the client's address (the
// server trusts loopback as its proxy, so X-Forwarded-For names the
// client), and the console's sign-in page and form. No answer is a 5xx;
// the API's refusals are the contract's error body; a body past ASCII
// declared in a charset other than UTF-8 is refused naming Content-Type,
// as the server reads only UTF-8.
func FuzzRequestHeaders(f *testing.F) {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	fe := newFuzzEnv(f, func(c *httpapi.Config) { c.TrustedProxies = []*net.IPNet{loopback} })
	for _, s := range []struct{ ctype, accept, key, xff, origin, cookie string }{
		{"application/json", "application/json", "", "", "", ""},
		{"application/json; charset=utf-8", "*/*", "k1", "203.0.113.7", "https://evil.example", ""},
		{"application/json; charset=latin1", "application/json, text/event-stream", "", "", "", ""},
		{"application/json; charset=ISO-8859-1", "", "k2", "2001:db8::1", "null", "simrelay_session=x"},
		{"application/json; charset=\"UTF-8\"", "text/event-stream;q=0.1, application/*", "", "203.0.113.7, 10.0.0.1", "", ""},
		{"application/json\napplication/json; charset=latin1", "", "", "unknown, 203.0.113.7", "", ""},
		{"application/json; charset=utf-16", "text/html", "", "::ffff:127.0.0.1", "", "simrelay_session=" + strings.Repeat("a", 4000)},
		{"application/json; charset", "application/json;q=0", "", "[2001:db8::1]:443", "", "simrelay_csrf=; simrelay_session=\xff"},
		{"application/json; charset=utf-8; charset=latin1", "*/*;;;", "", "999.1.1.1", "", "a=b; c"},
		{"application/json;;charset=latin1;=", ",,,", "", ",,,", "https://\xff", ""},
		{"text/plain; charset=us-ascii", "\xff", strings.Repeat("k", 5000), "1.2.3.4%eth0", "", ""},
		{"multipart/form-data; boundary=x; charset=utf8", "", "", strings.Repeat("1.2.3.4,", 1000), "", ""},
		{"", "", "", "", "", ""},
	} {
		for route := range hdrRoutes {
			f.Add(uint8(route), s.ctype, s.accept, s.key, s.xff, s.origin, s.cookie)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, ctype, accept, key, xff, origin, cookie string) {
		h := map[string]string{}
		for k, v := range map[string]string{"Accept": accept, "Idempotency-Key": key, "X-Forwarded-For": xff, "Origin": origin, "Cookie": cookie} {
			if v != "" {
				h[k] = v
			}
		}
		req := fuzzReq{method: "POST", header: h, multi: map[string][]string{"Content-Type": strings.Split(ctype, "\n")}}
		switch route % hdrRoutes {
		case hdrSend:
			req.path, req.op = "/chat/send", "/chat/send"
			req.body = []byte(`{"device_fingerprint":"fz-phone","phone":"+15550100001","message":"café"}`)
		case hdrMCP:
			req.path = "/mcp"
			req.body = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		case hdrPlans:
			req.method, req.path, req.op = "GET", "/plans", "/plans"
			req.header["Authorization"] = ""
		case hdrConsolePage:
			req.method, req.path, req.page = "GET", "/console/signin", true
			req.header["Authorization"] = ""
		case hdrConsoleSignIn:
			req.path, req.page = "/console/signin", true
			req.header["Authorization"] = ""
			req.body = []byte(url.Values{"email": {"owner@fuzz.test"}, "password": {"wrong-Password-1"}, "csrf": {"x"}}.Encode())
		}
		status, obj, raw := fe.exchange(t, req)
		if req.body != nil && !req.page && !isASCII(req.body) && declaresOtherCharset(req.multi["Content-Type"]) {
			if status != http.StatusBadRequest || !strings.Contains(string(raw), `"field":"Content-Type"`) {
				t.Fatalf("Content-Type %q: got %d %s, want 400 naming Content-Type", ctype, status, raw)
			}
		}
		if route%hdrRoutes == hdrSend && status/100 == 2 {
			fe.cancel(t, wantString(t, obj, "queueId"))
		}
	})
}

// declaresOtherCharset reports whether a Content-Type value names a
// charset that is not UTF-8 (or ASCII): an independent reading of the
// parameters, as RFC 9110 writes them, for the test's oracle.
func declaresOtherCharset(values []string) bool {
	for _, v := range values {
		params := strings.Split(v, ";")
		for _, p := range params[1:] {
			name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok || strings.ToLower(strings.TrimSpace(name)) != "charset" {
				continue
			}
			switch strings.ToLower(strings.Trim(strings.TrimSpace(value), `"`)) {
			case "utf-8", "utf8", "us-ascii", "ascii":
			default:
				return true
			}
		}
	}
	return false
}

// isASCII reports whether b holds ASCII bytes alone: such a body reads the
// same in any charset a client declares, and is not refused for it.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
