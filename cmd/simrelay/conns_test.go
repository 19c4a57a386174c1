package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/connlimit"
)

// TestOneClientCannotHoldEveryConnection: a client that opens keep-alive
// connections and leaves them idle holds at most --max-conns-per-ip of
// them (1,000 by default); the next is answered 429 rate_limited and
// closed, while another client's requests still go through. Without the
// bound one address held connections until the process ran out of file
// descriptors.
func TestOneClientCannotHoldEveryConnection(t *testing.T) {
	t.Parallel()
	bin, st, _ := companyStore(t)
	srv := startServer(t, bin, st)
	addr := strings.TrimPrefix(srv.url, "http://")
	request := func(c net.Conn) (*http.Response, string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return nil, err.Error()
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil, err.Error()
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}
	for i := range connlimit.DefaultPerClient {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if res, body := request(c); res == nil || res.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %v %s", i, res, body)
		}
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	res, body := request(over)
	if res == nil || res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"error":"rate_limited"`) {
		t.Fatalf("connection %d: %v %s, want 429 rate_limited", connlimit.DefaultPerClient+1, res, body)
	}
	other := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := other.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, body := request(c); res == nil || res.StatusCode != http.StatusOK {
		t.Fatalf("another address: %v %s, want 200", res, body)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	mres, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	if !strings.Contains(string(metrics), "\nsimrelay_http_conns_refused_total 1\n") {
		t.Fatal("/metrics does not count the refused connection in simrelay_http_conns_refused_total")
	}
}
