package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
)

// exportBounds sets the export's bounds of a test's server.
func exportBounds(b httpapi.ExportConfig) envOption {
	return func(c *httpapi.Config) { c.Export = b }
}

// fillExport stores n outbound messages of size characters for the
// company, so that its export is n*size bytes and more.
func fillExport(t *testing.T, e *env, co company, n, size int) {
	t.Helper()
	now := e.clock.Now()
	text := strings.Repeat("x", size)
	msgs := make([]store.Message, 0, n)
	for i := range n {
		msgs = append(msgs, store.Message{UUID: fmt.Sprintf("msg-%06d", i), CompanyID: uint64(co.id), Device: "acme-phone", Direction: store.Outbound,
			Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i%50), Text: text, SIMSlot: "SIM1",
			Status: store.MsgDelivered, Segments: 10, CreatedAt: now, UpdatedAt: now})
	}
	if err := e.store.ImportMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// dialExport sends an export's request over a connection whose receive
// buffer is rcvbuf bytes: a small one, so that a client that reads slowly
// or not at all backs the server's writes up at once.
func dialExport(t *testing.T, e *env, token string, rcvbuf int) net.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) }); err != nil {
			return err
		}
		return serr
	}}
	addr := strings.TrimPrefix(e.url, "http://")
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /company/export HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, token)
	return c
}

// openExport is dialExport that returns once the status line is read.
func openExport(t *testing.T, e *env, token string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := dialExport(t, e, token, 2048)
	br := bufio.NewReaderSize(c, 16)
	status, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("the export: %q, %v", status, err)
	}
	return c, br
}

// exportAccepted says whether a further export of the company is taken:
// it is read to its end.
func exportAccepted(t *testing.T, e *env, token string) bool {
	t.Helper()
	r := e.do(call{method: "GET", path: "/company/export", token: token})
	switch r.Status {
	case http.StatusOK:
		return true
	case http.StatusTooManyRequests:
		return false
	}
	t.Fatalf("an export: %d %s", r.Status, r.Body)
	return false
}

// TestCompanyExportStalledReaderLosesItsSlot: clients that stop reading
// after the first bytes hold every one of their company's export slots,
// but only until a write has waited the write timeout: then the stream is
// cut and the next export of the company is taken.
func TestCompanyExportStalledReaderLosesItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, exportBounds(httpapi.ExportConfig{WriteTimeout: time.Second}))
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	// Megabytes, far more than the sockets' buffers hold.
	fillExport(t, e, a, 3000, 3000)
	openExport(t, e, a.apiKey)
	openExport(t, e, a.apiKey)
	if exportAccepted(t, e, a.apiKey) {
		t.Fatalf("a third export ran beside two stalled ones")
	}
	e.eventually("an export slot after the stalled readers' write timeout", func() bool { return exportAccepted(t, e, a.apiKey) })
}

// TestCompanyExportTricklingReaderLosesItsSlot: a client that takes every
// write well within the write timeout, but slower on average than the
// minimum rate, keeps its stream only for the grace and what its bytes
// earned at that rate: a trickle a page a minute held a slot for as long
// as the company had pages.
func TestCompanyExportTricklingReaderLosesItsSlot(t *testing.T) {
	t.Parallel()
	const grace = 500 * time.Millisecond
	e := newEnv(t, roomy, exportBounds(httpapi.ExportConfig{WriteTimeout: time.Minute, MinRate: 4 << 20, Grace: grace}))
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	fillExport(t, e, a, 3000, 3000)
	// Each trickling export holds its slot for the grace at least, from
	// its request on: a third taken sooner than that after the first's
	// request ran beside both. One taken later proves nothing (a loaded
	// machine took longer than the grace to ask, and a slot may have been
	// given back already): the try is made again once both are cut.
	for try := 1; ; try++ {
		start := time.Now()
		var cut sync.WaitGroup
		for range 2 {
			c, br := openExport(t, e, a.apiKey)
			// About 100 KB/s, a fortieth of the minimum rate, until the
			// server cuts it: what the sockets' buffers took at once
			// (megabytes) earns about a second at that rate.
			cut.Go(func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					if _, err := br.Read(buf); err != nil {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		if !exportAccepted(t, e, a.apiKey) {
			break
		}
		if asked := time.Since(start); asked < grace {
			t.Fatalf("a third export ran beside two trickling ones (taken %v after the first's request)", asked)
		} else if try == 5 {
			t.Fatalf("a third export was taken each of %d tries, %v after the first's request at the last: "+
				"the two trickling ones were never seen holding their slots", try, asked)
		}
		cut.Wait() // the readers end when the server cuts their streams
	}
	poll.Within(t, time.Minute, "an export slot after the trickling readers ran out of time", func() bool { return exportAccepted(t, e, a.apiKey) })
}

// slowReader reads at most step bytes at a time, pausing between reads.
type slowReader struct {
	r     io.Reader
	step  int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), s.step)])
}

// TestCompanyExportSlowSteadyReaderGetsItAll: the time an export may wait
// on its client grows with what it sends: a client that keeps taking data
// above the minimum rate gets the whole document, though it takes several
// times the grace.
func TestCompanyExportSlowSteadyReaderGetsItAll(t *testing.T) {
	t.Parallel()
	// The write timeout is seconds: a write waits until the client has
	// taken about half of what the server's socket buffer holds (megabytes
	// on loopback).
	e := newEnv(t, roomy, exportBounds(httpapi.ExportConfig{WriteTimeout: 10 * time.Second, MinRate: 64 << 10, Grace: 500 * time.Millisecond}))
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	const total = 1000
	fillExport(t, e, a, total, 4000)
	// A receive buffer of 64 KiB, small beside a page; one of a few KiB
	// has the kernel's zero-window probes, spaced up to seconds, pace the
	// stream rather than the reader.
	c := dialExport(t, e, a.apiKey, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	// 8 KB every 5 ms, at most about 1.6 MB/s, 25 times the minimum rate:
	// the 4 MB take seconds, several times the grace.
	r, err := http.ReadResponse(bufio.NewReaderSize(&slowReader{r: c, step: 8 << 10, pause: 5 * time.Millisecond}, 8<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the export: %s", r.Status)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("a slow, steady reader was cut after %d bytes: %v", len(body), err)
	}
	if got := decodeExport(t, body); got != total {
		t.Fatalf("the export has %d messages, want %d", got, total)
	}
}

// decodeExport parses an export's document and counts its messages.
func decodeExport(t *testing.T, body []byte) int {
	t.Helper()
	var doc struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("the export does not parse (%d bytes): %v", len(body), err)
	}
	return len(doc.Messages)
}

// TestCompanyExportIsTheStoreWhenItBegan: the messages stored while an
// export streams are not in it, so a company that stores messages faster
// than its client reads still has an end.
func TestCompanyExportIsTheStoreWhenItBegan(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	// 6 MB, beyond what the server's socket buffer takes (4 MiB at most on
	// Linux): the export's later pages are read only as the client reads.
	const total = 1500
	fillExport(t, e, a, total, 4000)
	c := dialExport(t, e, a.apiKey, 4096)
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	r, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the export: %s", r.Status)
	}
	now := e.clock.Now()
	late := make([]store.Message, 0, 5)
	for i := range 5 {
		late = append(late, store.Message{UUID: fmt.Sprintf("late-%d", i), CompanyID: uint64(a.id), Device: "acme-phone", Direction: store.Outbound,
			Channel: "sms", Phone: "+15550100001", Text: "stored while the export runs", SIMSlot: "SIM1",
			Status: store.MsgQueued, Segments: 1, CreatedAt: now, UpdatedAt: now})
	}
	if err := e.store.ImportMessages(late); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("the export was cut after %d bytes: %v", len(body), err)
	}
	if got := decodeExport(t, body); got != total {
		t.Fatalf("the export has %d messages, want the %d stored when it began", got, total)
	}
}
