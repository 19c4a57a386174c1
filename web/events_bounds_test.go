package web_test

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/web"
)

// stalledStream opens GET /console/events on a raw connection with a tiny
// receive buffer, reads the answer's head and never reads again.
func (b *browser) stalledStream(t *testing.T) (net.Conn, int) {
	t.Helper()
	u, _ := url.Parse(b.e.url)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, b.e.url+"/console/events", nil)
	for _, c := range b.c.Jar.Cookies(u) {
		req.AddCookie(c)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, res.StatusCode
}

// streamHandlers counts the goroutines serving a live stream now, stuck in
// a write (blocked) or not (all): what the streams really cost the server,
// whatever the broker counts.
func streamHandlers() (all, blocked int) {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "web.(*Console).events(") {
			all++
			if strings.Contains(g, "waitWrite") {
				blocked++
			}
		}
	}
	return all, blocked
}

// A client that opens streams and never reads while large events flow:
// each stuck write ends at the write deadline, the handler returns, the
// connection is closed, and a stream dropped for falling behind keeps its
// slot until then, so the live handlers never outnumber the cap. Not
// parallel: it counts the process's goroutines.
func TestLiveStreamsOfAClientThatNeverReadsEnd(t *testing.T) {
	const max = 3
	var mu sync.Mutex
	conns := map[string]http.ConnState{} // by client address
	e := newEnv(t, func(o *envOptions) {
		o.streams = web.StreamConfig{PerSession: max, Max: max, WriteTimeout: 500 * time.Millisecond, Heartbeat: time.Hour}
		o.connState = func(c net.Conn, s http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			conns[c.RemoteAddr().String()] = s
		}
	})
	co, _, _, err := e.accounts.CreateCompany("Acme", account.OwnerInput{Email: "ada@acme.test", Password: "Correct1horse"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	if all, _ := streamHandlers(); all != 0 {
		t.Fatalf("%d stream handlers before the test", all)
	}
	var stalled []net.Conn
	for range max {
		conn, status := b.stalledStream(t)
		if status != http.StatusOK {
			t.Fatalf("stream %d: got %d, want 200", len(stalled)+1, status)
		}
		stalled = append(stalled, conn)
	}
	poll.Until(t, "the streams are open", func() bool { return e.broker.Streams() == max })

	// 12 MiB of events, more than the sockets' buffers hold: the writes
	// stall. Then a burst past the 64 buffered events drops the streams.
	big := strings.Repeat("x", 256<<10)
	for i := range 48 {
		e.broker.MessageChanged(store.Message{ID: uint64(i + 1), CompanyID: co.ID, Direction: store.Inbound, Text: big})
	}
	poll.Until(t, "the handlers stall in a write (or already gave up)", func() bool {
		all, blocked := streamHandlers()
		return blocked == max || all == 0
	})
	for i := range 80 {
		e.broker.MessageChanged(store.Message{ID: uint64(100 + i), CompanyID: co.ID, Direction: store.Inbound, Text: "small"})
	}
	for range max {
		if _, status := b.stalledStream(t); status != http.StatusOK && status != http.StatusTooManyRequests {
			t.Fatalf("another stream: got %d, want 200 or 429", status)
		}
		poll.Within(t, 2*time.Second, "no more stream handlers than the cap", func() bool {
			all, _ := streamHandlers()
			return all <= max
		})
	}
	poll.Until(t, "the stalled handlers return and their slots come back", func() bool {
		all, blocked := streamHandlers()
		return blocked == 0 && all == e.broker.Streams() && all <= max
	})
	// The server closed the stalled connections, with whatever the client
	// left unread in them.
	poll.Until(t, "the server closes the stalled connections", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range stalled {
			if conns[c.LocalAddr().String()] != http.StateClosed {
				return false
			}
		}
		return true
	})
}

// One company cannot take every live view: a session, a user and a company
// each have a share, and another company's console still streams.
func TestLiveStreamsAreSharedAmongUsersAndCompanies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) {
		o.streams = web.StreamConfig{PerSession: 2, PerUser: 3, PerCompany: 4, Max: 6, Heartbeat: time.Hour}
	})
	e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	ada1, ada2 := e.browser(), e.browser()
	ada1.signIn("ada@acme.test", "Correct1horse")
	ada2.signIn("ada@acme.test", "Correct1horse")
	mo := e.member(ada1)
	bo1, bo2 := e.browser(), e.browser()
	bo1.signIn("bo@bolt.test", "Correct1horse")
	bo2.signIn("bo@bolt.test", "Correct1horse")

	for _, step := range []struct {
		who   string
		b     *browser
		want  int
		words string
	}{
		{"ada's first session", ada1, 200, ""},
		{"ada's first session", ada1, 200, ""},
		{"ada's first session, over its 2", ada1, 429, "Too many live views"},
		{"ada's second session", ada2, 200, ""},
		{"ada's second session, over her 3", ada2, 429, "Too many live views"},
		{"mo, Acme's fourth", mo, 200, ""},
		{"mo, over Acme's 4", mo, 429, "company has too many"},
		{"bo, while Acme is at its share", bo1, 200, ""},
		{"bo", bo1, 200, ""},
		{"bo's second session, over the server's 6", bo2, 429, "server has too many"},
	} {
		_, status := step.b.stream(t)
		if status != step.want {
			t.Fatalf("%s: got %d, want %d", step.who, status, step.want)
		}
		if step.words != "" {
			res, err := step.b.c.Get(e.url + "/console/events")
			if err != nil {
				t.Fatal(err)
			}
			if p := read(t, res); p.status != step.want || !strings.Contains(p.body, step.words) || !strings.Contains(p.body, `"error":"rate_limited"`) {
				t.Errorf("%s: got %d %s, want %d with %q", step.who, p.status, p.body, step.want, step.words)
			}
		}
	}
	if got := e.broker.Streams(); got != 6 {
		t.Errorf("streams: got %d, want 6", got)
	}
}
