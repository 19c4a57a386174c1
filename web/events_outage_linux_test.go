//go:build linux

package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/web"
)

// Tests of the live view while the store refuses. The refusal is a real
// one: this process's file size limit is lowered under the embedded store's
// data pages, so each commit fails as on a full disk (EFBIG; Go ignores
// SIGXFSZ) and the store answers store.ErrDiskFull, as the store's own
// TestFullDiskFailsEveryWriterOfTheBatch does. The session's check writes
// once a minute (it keeps the session alive): with the test clock a minute
// on, that write is the one refused.
//
// Not parallel: the limit is the whole process's. Parallel tests wait until
// the sequential ones are done, so these tests' writes are the only ones.

// fullDisk lowers the file size limit until the returned func (or the
// test's end) lifts it. Chromium must have started before: a process
// started meanwhile would keep the limit.
func fullDisk(t *testing.T) (lift func()) {
	t.Helper()
	storetest.EmbeddedOnly(t, "the full disk is the embedded store's file's")
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// Two pages: bbolt's meta pages fit, no page of data does.
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 2 * 4096, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
			t.Fatalf("restore the file size limit: %v", err)
		}
	}
	t.Cleanup(lift)
	return lift
}

// A store that cannot check the session is the 503 every console page
// answers, on the stream's request and at its heartbeat; only a session that
// ended is 401 and signedout. Both were 401 and signedout, so the page told
// the user their session had expired and sent them to a sign-in that the
// same store refused.
func TestLiveStreamRefusedByTheStoreIsUnavailableNotSignedOut(t *testing.T) {
	storetest.EmbeddedOnly(t, "the full disk is the embedded store's file's")
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{Heartbeat: 50 * time.Millisecond} })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	events, status := b.stream(t)
	if status != http.StatusOK {
		t.Fatalf("stream: %d", status)
	}
	e.clock.Advance(time.Minute) // the next check of the session writes
	lift := fullDisk(t)

	ev := nextEvent(t, events)
	if ev[0] != "unavailable" || !strings.Contains(ev[1], `"error":"unavailable"`) {
		t.Errorf("heartbeat with the store refusing: got event %q %s, want unavailable with the 503's body", ev[0], ev[1])
	}
	if p := b.get("/console/events"); p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, `"error":"unavailable"`) {
		t.Errorf("a stream asked for with the store refusing: got %d %s, want 503 unavailable", p.status, p.body)
	}
	lift()
	if _, status := b.stream(t); status != http.StatusOK {
		t.Errorf("a stream once the store takes writes again: got %d, want 200", status)
	}
	if p := e.browser().get("/console/events"); p.status != http.StatusUnauthorized {
		t.Errorf("a stream without a session: got %d, want 401", p.status)
	}
}

// The page tells a store that is out of reach from a session that ended:
// it says the live view resumes when the store is back, not that the
// session expired, and resumes by itself once it is; a session that did
// end still says so.
func TestBrowserLiveViewWaitsOutTheStoreAndStillSaysExpired(t *testing.T) {
	storetest.EmbeddedOnly(t, "the full disk is the embedded store's file's")
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{Heartbeat: 100 * time.Millisecond} })
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	ctx := chrome(t) // before the limit: Chromium must not inherit it
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	waitFor(t, ctx, "the live stream", `document.getElementById("chat").dataset.live === "true"`)

	e.clock.Advance(time.Minute) // the next check of the session writes
	lift := fullDisk(t)
	waitText(t, ctx, "#banner", "cannot reach its store; live updates resume when it is back")
	if got := eval[string](t, ctx, `document.getElementById("banner").textContent`); strings.Contains(got, "expired") {
		t.Errorf("with the store out of reach the page says %q", got)
	}
	lift()
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
