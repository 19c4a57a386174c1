//go:build linux

package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"

	"github.com/simrelay/simrelay/internal/ownprocess"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/web"
)

// Tests of the live view while the store refuses, for real on both
// backends. On PostgreSQL the relay the store reaches its database through
// is cut: the database is out of reach (store.ErrUnavailable). On bbolt
// this process's file size limit is lowered under the store's data pages,
// so each commit fails as on a full disk (EFBIG; Go ignores SIGXFSZ) and the
// store answers store.ErrDiskFull, as the store's own
// TestFullDiskFailsEveryWriterOfTheBatch does; reads still work there, but
// the session's check writes once a minute (it keeps the session alive), so
// with the test clock a minute on that write is the one refused.
//
// On bbolt the file size limit is the whole process's, so the test runs in
// a process of its own (ownprocess): nothing else writes under the limit,
// go test's own record of the files the binary opens included, which the
// limit made fail the package after its last test passed. On PostgreSQL
// the relay a test cuts is its own.

// A full disk of the embedded store refuses writes only: the console's
// pages and its live view read, so they go on, though the session's
// once-a-minute write is refused (account.ConsoleAuthenticate lets it
// pass). They answered 503 for every page before.
func TestFullDiskKeepsTheConsoleReadable(t *testing.T) {
	if storetest.Postgres() {
		t.Skip("PostgreSQL out of reach refuses reads too (TestLiveStreamRefusedByTheStoreIsUnavailableNotSignedOut)")
	}
	t.Parallel()
	if !ownprocess.Run(t) {
		return
	}
	e, relay := outageEnv(t, 50*time.Millisecond)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	storeOut(t, e, relay)
	if p := b.get("/console/messages"); p.status != http.StatusOK {
		t.Errorf("a console page on a full disk: %d %s, want 200", p.status, p.body)
	}
	if _, status := b.stream(t); status != http.StatusOK {
		t.Errorf("the live stream on a full disk: %d, want 200", status)
	}
}

// outageEnv is a server whose store storeOut can take away.
func outageEnv(t *testing.T, heartbeat time.Duration) (*env, *pgtest.Relayed) {
	t.Helper()
	var relay *pgtest.Relayed
	e := newEnv(t, func(o *envOptions) {
		o.streams = web.StreamConfig{Heartbeat: heartbeat}
		o.relayed = func(r *pgtest.Relayed) { relay = r }
	})
	return e, relay
}

// storeOut makes e's store refuse until the returned func (or the test's
// end) brings it back. On bbolt, Chromium must have started before: a
// process started meanwhile would keep the file size limit.
func storeOut(t *testing.T, e *env, relay *pgtest.Relayed) (back func()) {
	t.Helper()
	e.clock.Advance(time.Minute) // the next check of a session writes
	if relay != nil {
		relay.Cut()
		t.Cleanup(relay.Resume)
		return relay.Resume
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// Two pages: bbolt's meta pages fit, no page of data does.
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 2 * 4096, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	lifted := false
	back = func() {
		if lifted {
			return
		}
		lifted = true
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
			t.Fatalf("restore the file size limit: %v", err)
		}
	}
	t.Cleanup(back)
	return back
}

// A store that cannot check the session is the 503 every console page
// answers, on the stream's request and at its heartbeat; only a session that
// ended is 401 and signedout. Both were 401 and signedout, so the page told
// the user their session had expired and sent them to a sign-in that the
// same store refused.
func TestLiveStreamRefusedByTheStoreIsUnavailableNotSignedOut(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("the embedded store reads on through a full disk (TestFullDiskKeepsTheConsoleReadable); this runs on PostgreSQL")
	}
	t.Parallel() // the relay storeOut cuts is this test's own
	e, relay := outageEnv(t, 50*time.Millisecond)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	events, status := b.stream(t)
	if status != http.StatusOK {
		t.Fatalf("stream: %d", status)
	}
	back := storeOut(t, e, relay)

	ev := nextEvent(t, events)
	if ev[0] != "unavailable" || !strings.Contains(ev[1], `"error":"unavailable"`) {
		t.Errorf("heartbeat with the store refusing: got event %q %s, want unavailable with the 503's body", ev[0], ev[1])
	}
	if p := b.get("/console/events"); p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, `"error":"unavailable"`) {
		t.Errorf("a stream asked for with the store refusing: got %d %s, want 503 unavailable", p.status, p.body)
	}
	back()
	// A pooled connection the cut broke may fail one more request.
	poll.Until(t, "a stream once the store is back", func() bool {
		_, status := b.stream(t)
		return status == http.StatusOK
	})
	if p := e.browser().get("/console/events"); p.status != http.StatusUnauthorized {
		t.Errorf("a stream without a session: got %d, want 401", p.status)
	}
}

// The page tells a store that is out of reach from a session that ended:
// it says the live view resumes when the store is back, not that the
// session expired, and resumes by itself once it is; a session that did
// end still says so.
func TestBrowserLiveViewWaitsOutTheStoreAndStillSaysExpired(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("the embedded store reads on through a full disk (TestFullDiskKeepsTheConsoleReadable); this runs on PostgreSQL")
	}
	t.Parallel() // the relay storeOut cuts is this test's own
	e, relay := outageEnv(t, 100*time.Millisecond)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	ctx := chrome(t) // before storeOut: Chromium must not inherit its limit
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	waitFor(t, ctx, "the live stream", `document.getElementById("chat").dataset.live === "true"`)

	back := storeOut(t, e, relay)
	waitText(t, ctx, "#banner", "cannot reach its store; live updates resume when it is back")
	if got := eval[string](t, ctx, `document.getElementById("banner").textContent`); strings.Contains(got, "expired") {
		t.Errorf("with the store out of reach the page says %q", got)
	}
	back()
	waitFor(t, ctx, "the live stream back, the banner gone",
		`document.getElementById("chat").dataset.live === "true" && document.getElementById("banner").hidden`)

	e.clock.Advance(13 * time.Hour) // past the session's idle limit
	waitText(t, ctx, "#banner", "Your session has expired")
}

// nextEvent is the stream's next event other than a ping, within 10 s.
func nextEvent(t *testing.T, ch <-chan [2]string) [2]string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended without an event")
			}
			if ev[0] != "ping" {
				return ev
			}
		case <-deadline:
			t.Fatal("no event but pings within 10 s")
		}
	}
}
