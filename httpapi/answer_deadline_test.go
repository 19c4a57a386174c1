package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/poll"
)

// TestAnswerToAClientThatStopsReadingEnds: a client that asks for a large
// answer (an MCP read_conversation of 100 messages of 10,000 four-byte
// characters, 8 MB, more than the sockets hold) and stops reading holds
// its request, with the answer in the server's memory, until the answer's
// write deadline, then the server cuts it: the request ends (it is counted
// in /metrics), its goroutine and its answer go. Without the deadline
// the write waited for ever, and a client holding such requests open held
// their answers (8 stalled reads held 380 MB of the server's memory for as
// long as their connections stayed open). A phone link, whose connection
// is hijacked from such a request, keeps no deadline of it: it sends and
// receives long after the deadline has passed.
func TestAnswerToAClientThatStopsReadingEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, func(c *httpapi.Config) { c.AnswerWriteTimeout = 2 * time.Second })
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "acme-phone")
	ph := e.runPhone(reg, "SIM1", false)
	d, err := e.store.CompanyDevice(uint64(a.id), "acme-phone")
	if err != nil {
		t.Fatal(err)
	}
	storeLongFrom(t, e, d.CompanyID, d.ID, "+15550000001", 100)

	// The client reads nothing: the server's write is cut at its deadline,
	// and the request ends. So too through a writer wrapped around
	// net/http's (a middleware in front of the API's handler), which the
	// deadline reaches by unwrapping it. The two stall at once, so that
	// the test waits out one deadline, not two in turn: each request is
	// counted once it ends, so two counted are both ended.
	wrapped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.handler.ServeHTTP(unwrappable{w}, r)
	}))
	t.Cleanup(wrapped.Close) // after the stalled connections close (cleanups run last first)
	stallAnswer(t, e.url, a.apiKey)
	stallAnswer(t, wrapped.URL, a.apiKey)
	poll.Within(t, 30*time.Second, "the stalled answers' requests end, direct and through a wrapped writer", func() bool {
		m := e.do(call{method: "GET", path: "/metrics"})
		return strings.Contains(string(m.Raw), `simrelay_http_requests_total{method="POST",route="/mcp",status="200"} 2`)
	})

	// The phone's link, opened well before, still carries a send now that
	// the deadline has passed, and never dropped.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey,
		body: map[string]any{"device_fingerprint": "acme-phone", "phone": "+15550000002", "message": "still linked"}}), http.StatusOK, "")
	e.eventually("the phone gets the send", func() bool { return len(ph.Jobs()) == 1 })
	for {
		select {
		case up := <-ph.states:
			if !up {
				t.Fatal("the phone's link dropped")
			}
			continue
		default:
		}
		break
	}
}

// TestSlowUploadAnsweredPastTheAnswerDeadline: an agent's upload may take
// far longer than the answer's deadline to arrive (two minutes for each
// 256 KiB: over two hours for 16 MiB on a slow link), so its answer's
// time starts once the file is stored, not at the request's start: an
// upload that arrived after the deadline was stored and its 201 never
// written, and the agent uploaded the file again.
func TestSlowUploadAnsweredPastTheAnswerDeadline(t *testing.T) {
	t.Parallel()
	const deadline = time.Second
	e := newEnv(t, roomy, func(c *httpapi.Config) { c.AnswerWriteTimeout = deadline })
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "acme-agent")
	start := time.Now()
	u := startSlowUpload(t, e, reg.DeviceToken, "slow/0")
	e.eventually("the upload's request is older than the answer's deadline", func() bool { return time.Since(start) > 2*deadline })
	u.finish(t)
}

// unwrappable is a middleware's writer: it hides net/http's own (its
// SetWriteDeadline among its methods) and hands it over by Unwrap.
type unwrappable struct{ http.ResponseWriter }

func (u unwrappable) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// stallAnswer asks the server at url for an 8 MB MCP answer on a
// connection that never reads it; the connection closes with the test.
func stallAnswer(t *testing.T, url, apiKey string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_conversation","arguments":{"device_fingerprint":"acme-phone","phone":"+15550000001","limit":100}}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		apiKey, len(body), body)
}
