package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/poll"
)

// holdReads sends n GET path of the key's on connections that never read
// their answers past its status line (a receive buffer of 4 KiB), so that
// each read's answer, larger than the server's socket buffers, holds its
// request, and its place, until the connection closes; closed at the
// test's end. It returns once each answer began with 200: every request
// holds its place then (one that met the others' places taken, while
// they were still reading the store, would have been refused instead).
func holdReads(t *testing.T, e *env, key, path string, n int) []net.Conn {
	t.Helper()
	var held []net.Conn
	for range n {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, key)
		held = append(held, conn)
	}
	for i, conn := range held {
		if err := conn.SetReadDeadline(time.Now().Add(poll.Timeout)); err != nil {
			t.Fatal(err)
		}
		status, err := bufio.NewReaderSize(conn, 64).ReadString('\n')
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200 ") {
			t.Fatalf("held read %d: its answer began %q (%v), want 200", i, status, err)
		}
	}
	return held
}

// storeLongLess stores n inbound messages of 10,000 '<' from one number
// to the company's device: a page of 100 is 6 MB of JSON (\u003c each).
func storeLongLess(t *testing.T, e *env, a company, fingerprint, phone string, n int) {
	t.Helper()
	d, err := e.store.CompanyDevice(uint64(a.id), fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("<", 10000)
	for i := range n {
		m := longInbound(d.CompanyID, d.ID, phone, text, fmt.Sprintf("less-%s-%d", phone, i))
		if _, _, err := e.store.StoreInbound(&m, e.clock.Now); err != nil {
			t.Fatal(err)
		}
	}
}

const heldPage = "/chat/messages?device_fingerprint=acme-phone&phone=%2B15550000001&limit=100"

// TestListReadsOfACompanyAreBounded: a company's list reads (the message,
// conversation and inbound lists, each up to 4 MB of texts held until its
// answer is written) run httpapi.ReadsPerCompany at once. With its places
// held (by clients that do not read their answers), the company's next
// list read, of any of those routes, waits for one, then answers 429
// rate_limited with Retry-After, while another company's reads are
// answered, and the company's reads of one record take no place; once
// the held ones end, the company's lists are read again.
func TestListReadsOfACompanyAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, func(c *httpapi.Config) { c.ReadWait = 200 * time.Millisecond })
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Bolt", "owner@bolt.test")
	e.pairPhone(a.apiKey, "acme-phone")
	e.pairPhone(b.apiKey, "bolt-phone")
	storeLongLess(t, e, a, "acme-phone", "+15550000001", 100)

	held := holdReads(t, e, a.apiKey, heldPage, httpapi.ReadsPerCompany)
	// The list routes, of a company's phone.
	lists := []func(phone string) string{
		func(p string) string { return "/chat/messages?phone=%2B15550000001&device_fingerprint=" + p },
		func(p string) string { return "/chat/conversations?device_fingerprint=" + p },
		func(p string) string { return "/automation/inbound-sms?device_fingerprint=" + p },
		func(string) string { return "/whatsapp/messages?number_id=1" },
		func(string) string { return "/imessage/messages?handle_id=1" },
	}
	var refused resp
	poll.Within(t, 30*time.Second, "the company's next list read is refused while its places are held", func() bool {
		refused = e.do(call{method: "GET", path: lists[1]("acme-phone"), token: a.apiKey})
		return refused.Status == http.StatusTooManyRequests
	})
	e.want(refused, http.StatusTooManyRequests, "rate_limited")
	if refused.Header.Get("Retry-After") != "5" || !strings.Contains(refused.str("message"), fmt.Sprintf("list reads under way are as many as may run at once (%d)", httpapi.ReadsPerCompany)) {
		t.Fatalf("the refusal: Retry-After %q, %s", refused.Header.Get("Retry-After"), refused.Raw)
	}
	for _, path := range lists {
		e.want(e.do(call{method: "GET", path: path("acme-phone"), token: a.apiKey}), http.StatusTooManyRequests, "rate_limited")
		// Another company's places are its own (its agent lists answer
		// 404: it has no such number).
		if r := e.do(call{method: "GET", path: path("bolt-phone"), token: b.apiKey}); r.Status != http.StatusOK && r.Status != http.StatusNotFound {
			t.Fatalf("GET %s of another company: %d %s", path("bolt-phone"), r.Status, r.Raw)
		}
	}
	// A read of one record is no list.
	e.want(e.do(call{method: "GET", path: "/automation/latest-sms", token: a.apiKey}), http.StatusOK, "")

	for _, c := range held {
		c.Close()
	}
	poll.Within(t, 30*time.Second, "the company's lists are read again once its held reads end", func() bool {
		return e.do(call{method: "GET", path: lists[1]("acme-phone"), token: a.apiKey}).Status == http.StatusOK
	})
}

// TestListReadWaitsForAPlace: a list read that finds its company's places
// taken waits for one rather than being refused at once, and is answered
// when one is given back.
func TestListReadWaitsForAPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, func(c *httpapi.Config) { c.ReadWait = time.Minute })
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	storeLongLess(t, e, a, "acme-phone", "+15550000001", 100)

	held := holdReads(t, e, a.apiKey, heldPage, httpapi.ReadsPerCompany)
	answered := make(chan resp, 1)
	go func() {
		answered <- e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=acme-phone", token: a.apiKey})
	}()
	// The held reads keep every place until their connections close: the
	// next read, seen waiting for one, was neither refused nor answered.
	poll.Until(t, "a list read waits while the company's places are held", func() bool {
		select {
		case r := <-answered:
			t.Fatalf("a list read was answered while its company's places were held: %d %s", r.Status, r.Raw)
		default:
		}
		return e.api.ListReadsWaiting() == 1
	})
	held[0].Close()
	select {
	case r := <-answered:
		e.want(r, http.StatusOK, "")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting list read was not answered once a place was given back")
	}
}
