package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/poll"
)

// TestMCPRequestsOfACompanyAreBounded: a company's MCP requests run
// httpapi.MCPPerCompany at once. Each of a read_conversation's answers (8
// MB here) peaks near 45 MB of the server's memory while it is built and
// held while it is written, and one API key may send as many at once as
// its rate limit lets it (32 at once peaked at 1.6 GB): with its places
// held (by clients that do not read their answers), the company's next
// request waits for one, then answers 429 rate_limited with Retry-After,
// while another company's requests are answered at once; once the held
// ones end, the company's requests run again.
func TestMCPRequestsOfACompanyAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, func(c *httpapi.Config) { c.MCPWait = 200 * time.Millisecond })
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Bolt", "owner@bolt.test")
	e.pairPhone(a.apiKey, "acme-phone")
	d, err := e.store.CompanyDevice(uint64(a.id), "acme-phone")
	if err != nil {
		t.Fatal(err)
	}
	storeLongFrom(t, e, d.CompanyID, d.ID, "+15550000001", 100)

	read := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_conversation","arguments":{"device_fingerprint":"acme-phone","phone":"+15550000001","limit":100}}}`
	var held []net.Conn
	for range httpapi.MCPPerCompany {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
			a.apiKey, len(read), read)
		held = append(held, conn)
	}
	list := func(key string) resp {
		return e.do(call{method: "POST", path: "/mcp", token: key, body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			header: map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}})
	}
	var refused resp
	poll.Within(t, 30*time.Second, "the company's next MCP request is refused while its places are held", func() bool {
		refused = list(a.apiKey)
		return refused.Status == http.StatusTooManyRequests
	})
	e.want(refused, http.StatusTooManyRequests, "rate_limited")
	if refused.Header.Get("Retry-After") != "5" || !strings.Contains(refused.str("message"), fmt.Sprintf("MCP requests under way are as many as may run at once (%d)", httpapi.MCPPerCompany)) {
		t.Fatalf("the refusal: Retry-After %q, %s", refused.Header.Get("Retry-After"), refused.Raw)
	}
	// Another company's places are its own.
	e.want(list(b.apiKey), http.StatusOK, "")

	for _, c := range held {
		c.Close()
	}
	poll.Within(t, 30*time.Second, "the company's MCP requests run again once its held ones end", func() bool {
		return list(a.apiKey).Status == http.StatusOK
	})
}
