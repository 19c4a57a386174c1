package web_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/web"
)

// stream opens the live stream of a signed-in browser and hands its events
// (event name and data) to a channel.
func (b *browser) stream(t *testing.T) (<-chan [2]string, int) {
	t.Helper()
	res, err := b.openStream(t, b.e.url)
	if err != nil {
		t.Fatal(err)
	}
	return b.events(res)
}

// openStream asks base (a server of the browser's env) for the live stream.
func (b *browser) openStream(t *testing.T, base string) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/console/events", nil)
	res, err := b.c.Do(req)
	if err != nil {
		cancel()
	}
	return res, err
}

// events hands the events of an answer to openStream to a channel, or
// answers its status when it is no stream.
func (b *browser) events(res *http.Response) (<-chan [2]string, int) {
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, res.StatusCode
	}
	out := make(chan [2]string, 64)
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case line == ": ping":
				out <- [2]string{"ping", "ping"}
			case strings.HasPrefix(line, "data: "):
				out <- [2]string{name, strings.TrimPrefix(line, "data: ")}
			}
		}
		close(out)
	}()
	return out, http.StatusOK
}

func waitEvent(t *testing.T, ch <-chan [2]string, want string) string {
	t.Helper()
	return waitEvents(t, ch, want)[0]
}

// waitEvents reads events until one holding each of wants has come, in
// any order: changes told from different goroutines (the send's queued,
// the phone's reports) may reach a tab in either order, as the page
// knows (docs/console.md, "Live updates"). It returns them in wants'
// order; on failure it names the events it read.
func waitEvents(t *testing.T, ch <-chan [2]string, wants ...string) []string {
	t.Helper()
	found := make([]string, len(wants))
	left := len(wants)
	var seen []string
	deadline := time.After(10 * time.Second)
	for left > 0 {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before events with %q; it carried:\n%s", missing(wants, found), strings.Join(seen, "\n"))
			}
			seen = append(seen, ev[0]+" "+ev[1])
			for i, want := range wants {
				if found[i] == "" && strings.Contains(ev[1], want) {
					found[i] = ev[1]
					left--
					break
				}
			}
		case <-deadline:
			t.Fatalf("no events with %q within 10 s; the stream carried:\n%s", missing(wants, found), strings.Join(seen, "\n"))
		}
	}
	return found
}

func missing(wants, found []string) []string {
	var out []string
	for i, w := range wants {
		if found[i] == "" {
			out = append(out, w)
		}
	}
	return out
}

func TestLiveStreamCarriesStatusesAndInboundOfTheCompanyOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(keyA), "fp-acme", true)
	ada, bo := e.browser(), e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	bo.signIn("bo@bolt.test", "Correct1horse")
	adaEvents, _ := ada.stream(t)
	boEvents, _ := bo.stream(t)
	poll.Until(t, "both streams are open", func() bool { return e.broker.Streams() == 2 })

	p := ada.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-acme"}, "phone": {"+15550100000"}, "message": {"hello there"}, "sim_slot": {"SIM1"}})
	if p.status != http.StatusOK {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	waitEvents(t, adaEvents, `"status":"queued"`, `"status":"delivered"`)

	<-ph.Receive(proto.Inbound{ClientID: "in-1", Channel: proto.ChannelSMS, From: "+15550100000", Message: "hi back", SIMSlot: "SIM1"})
	waitEvent(t, adaEvents, `"text":"hi back"`)

	select {
	case ev := <-boEvents:
		t.Errorf("another company's tab got %v", ev)
	default:
	}
}

func TestLiveStreamsAreCappedPerSessionAndEndOnSignOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{PerSession: 2, Heartbeat: 50 * time.Millisecond} })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	first, _ := b.stream(t)
	b.stream(t)
	if _, status := b.stream(t); status != http.StatusTooManyRequests {
		t.Errorf("a third stream of a session capped at 2: got %d, want 429", status)
	}
	if _, status := e.browser().stream(t); status != http.StatusUnauthorized {
		t.Errorf("a stream without a session: got %d, want 401", status)
	}
	if p := b.post("/console/signout", nil); p.status != http.StatusOK {
		t.Fatalf("sign out: %d", p.status)
	}
	waitEvent(t, first, "{}") // the signedout event
	poll.Until(t, "the streams end", func() bool { return e.broker.Streams() == 0 })
}

// simrelay serve sets a read timeout; net/http lifts it once a request
// without a body is read, so a stream lives on. This keeps it so.
//
// The stream is opened on a server of its own with the short timeout,
// serving the env's handler, and asked again when that server closed the
// connection before reading the request (its timeout passed first); the
// sign-in goes to the env's server, which has none. Every request of the
// test had the 100 ms from its connection's start to its read, which a
// loaded machine took longer over: the sign-in failed with EOF.
func TestLiveStreamOutlivesTheServersReadTimeout(t *testing.T) {
	t.Parallel()
	const readTimeout = 100 * time.Millisecond
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{Heartbeat: readTimeout / 4} })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	short := httptest.NewUnstartedServer(e.handler)
	short.Config.ReadTimeout = readTimeout
	short.Start()
	t.Cleanup(short.Close)
	var res *http.Response
	poll.Until(t, "the stream opened on the server with the read timeout", func() bool {
		var err error
		res, err = b.openStream(t, short.URL)
		return err == nil
	})
	events, status := b.events(res)
	if status != http.StatusOK {
		t.Fatalf("the stream: got %d, want 200", status)
	}
	start := time.Now()
	for time.Since(start) < 4*readTimeout {
		if _, ok := <-events; !ok {
			t.Fatalf("the stream ended after %s, with a read timeout of %s", time.Since(start), readTimeout)
		}
	}
}

// A message the sweeper expires shows as expired on open tabs too, as
// every other status change does.
func TestLiveStreamCarriesExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.company("Acme", "ada@acme.test", "Correct1horse")
	// Paired but never connected: nobody takes the job.
	if _, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{PairingCode: e.pairingCode(keyA), DeviceFingerprint: "fp-acme", AppVersion: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	events, _ := ada.stream(t)
	poll.Until(t, "the stream is open", func() bool { return e.broker.Streams() == 1 })
	if p := ada.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-acme"}, "phone": {"+15550100000"}, "message": {"nobody takes this"}, "sim_slot": {"SIM1"}}); p.status != http.StatusOK {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	waitEvent(t, events, `"status":"queued"`)
	// A day passes with the person at work in another tab: the session
	// stays (each request restarts its idle clock), so its stream carries
	// the company's messages on.
	for range 5 {
		e.clock.Advance(5 * time.Hour)
		if p := ada.get("/console/"); p.status != http.StatusOK {
			t.Fatalf("the session ended: %d", p.status)
		}
	}
	e.sms.Expire()
	waitEvent(t, events, `"status":"expired"`)
}

// A session ends after its idle time without a request; a live stream's
// heartbeats are no requests of the person's. A messages page left open
// on an unattended computer is signed out after the idle time as any
// other page is: its stream ends with signedout and the next page asks
// for a sign-in. Each heartbeat's check restarted the idle clock, so an
// open tab kept its session for the whole week of its lifetime.
func TestLiveStreamDoesNotKeepAnIdleSessionAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{Heartbeat: 20 * time.Millisecond} })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	events, status := b.stream(t)
	if status != http.StatusOK {
		t.Fatalf("stream: %d", status)
	}
	// Hour by hour, each hour checked by a heartbeat (two pings: the
	// second was checked after the clock moved), up to the idle time.
	ping := func() bool {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return false
				}
				if ev[0] == "ping" {
					return true
				}
				if ev[0] == "signedout" {
					return false
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no heartbeat")
			}
		}
	}
	for h := 1; h < 12; h++ {
		e.clock.Advance(time.Hour)
		for range 2 {
			if !ping() {
				t.Fatalf("the stream ended after %d hours, within the idle time", h)
			}
		}
	}
	e.clock.Advance(time.Hour)
	deadline := time.After(10 * time.Second)
	for ended := false; !ended; {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				t.Fatal("the stream ended without signedout")
			case ev[0] == "ping":
				continue
			case ev[0] != "signedout":
				t.Fatalf("the stream's last event: %v, want signedout", ev)
			}
			ended = true
		case <-deadline:
			t.Fatal("the stream lives on past 12 hours without a request")
		}
	}
	if p := b.get("/console/devices"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/console/signin") {
		t.Errorf("a page after 12 idle hours with a tab open: %d to %q, want the sign-in page", p.status, p.location)
	}
}

// leaseLog is a cluster's stream leases as a test sees them: what each
// take was given.
type leaseLog struct {
	mu       sync.Mutex
	sessions []string
}

func (l *leaseLog) Take(_ context.Context, _, _ uint64, session string, _, _, _ int) (uint64, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions = append(l.sessions, session)
	return uint64(len(l.sessions)), "", nil
}

func (l *leaseLog) Give(context.Context, uint64) error { return nil }

func (l *leaseLog) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sessions)
}

// On a cluster each live stream is leased in the database under its
// session, to count the session's tabs over every node. The session's id
// is the cookie that signs the browser in, and the store keeps only its
// hash: the lease names the session by a digest, never by the cookie, which
// anyone reading the lease table could have signed in with.
func TestStreamLeaseNeverHoldsTheSessionCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	leases := &leaseLog{}
	e.broker.ShareStreams(leases, slog.New(slog.DiscardHandler))
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	u, _ := url.Parse(e.url)
	var cookie string
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "simrelay_session" {
			cookie = c.Value
		}
	}
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	for range 2 {
		if _, status := b.stream(t); status != http.StatusOK {
			t.Fatalf("stream: %d", status)
		}
	}
	got := leases.taken()
	if len(got) != 2 {
		t.Fatalf("leases taken: %d, want 2", len(got))
	}
	for _, s := range got {
		if s == "" || strings.Contains(s, cookie) || strings.Contains(cookie, s) {
			t.Errorf("a lease names the session as %q; its cookie is %q", s, cookie)
		}
	}
	if got[0] != got[1] {
		t.Errorf("one session's two streams are leased under %q and %q: its tabs are not counted together", got[0], got[1])
	}
}

// A stream opens with its retry field: the reconnect delay a browser waits
// after the stream ends (a resync, a restart), 3 s unless StreamConfig
// sets another, and up to half as much again at random, so that the tabs
// a resync ends at once come back spread out: streams opened one after
// another do not all tell the same delay.
func TestLiveStreamTellsItsRetry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg      web.StreamConfig
		min, max int // milliseconds
	}{
		{web.StreamConfig{}, 3000, 4500},
		{web.StreamConfig{Retry: 250 * time.Millisecond}, 250, 375},
	} {
		e := newEnv(t, func(o *envOptions) { o.streams = c.cfg })
		e.company("Acme", "ada@acme.test", "Correct1horse")
		ada := e.browser()
		ada.signIn("ada@acme.test", "Correct1horse")
		seen := map[int]bool{}
		for range 8 {
			ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/console/events", nil)
			res, err := ada.c.Do(req)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			line, err := bufio.NewReader(res.Body).ReadString('\n')
			res.Body.Close()
			cancel()
			var ms int
			if res.StatusCode != http.StatusOK || func() bool { _, e := fmt.Sscanf(line, "retry: %d\n", &ms); return e != nil }() || ms < c.min || ms > c.max {
				t.Fatalf("%+v: got %d, first line %q (%v); want 200 and retry: %d to %d", c.cfg, res.StatusCode, line, err, c.min, c.max)
			}
			seen[ms] = true
		}
		if len(seen) < 2 {
			t.Errorf("%+v: eight streams all told retry %v: a resync's tabs would all come back at once", c.cfg, seen)
		}
	}
}
