package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The request log names the path as it was asked, percent-encoding kept:
// an encoded slash's refusal logged as /device/a/b would name a path that
// was not asked (and that a route may serve).
func TestRequestLogKeepsTheAskedPath(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	if status, _ := n.get(t, "/device/a%2Fb"); status != http.StatusNotFound {
		t.Fatalf("GET /device/a%%2Fb: %d, want 404", status)
	}
	var line string
	for _, l := range strings.Split(n.logs.String(), "\n") {
		if strings.Contains(l, "msg=request") && strings.Contains(l, "status=404") {
			line = l
		}
	}
	if !strings.Contains(line, "path=/device/a%2Fb ") {
		t.Errorf("the request's log line %q, want path=/device/a%%2Fb", line)
	}
}

// A CONNECT (its target a host and port, no path) is refused as an unknown
// route whose message names the target: "There is no route CONNECT
// example.com:443.", not a sentence ending in " ." with nothing named.
func TestConnectNamesItsTarget(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct{ Error, Message string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusNotFound || body.Message != "There is no route CONNECT example.com:443." {
		t.Errorf("CONNECT example.com:443: got %d %+v", res.StatusCode, body)
	}
}
