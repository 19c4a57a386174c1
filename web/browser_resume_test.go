package web_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/web"
)

// TestBrowserSignInAgainInAnotherTabThenSend: a form whose session ended
// says "Sign in again in a new tab, then come back and send again: what you
// typed is kept here." Doing just that sends it: the page takes the new
// session's token (its forms carried the ended session's, which the new
// session refused with a 403 that asked for a reload, losing what was
// typed).
func TestBrowserSignInAgainInAnotherTabThenSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "type an invitation", chromedp.Navigate(e.url+"/console/team"), chromedp.SendKeys(field("email"), "late@acme.test"),
		chromedp.SendKeys(field("firstName"), "Late"), chromedp.SendKeys(field("lastName"), "Comer"))
	if err := e.store.RevokeUserSessions(1); err != nil { // the session ended (idle, or signed out elsewhere)
		t.Fatal(err)
	}
	do(t, ctx, "submit", chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	waitText(t, ctx, "#banner", "session has expired")

	other, cancel := chromedp.NewContext(ctx) // a new tab of the same browser
	defer cancel()
	signInUI(t, other, e.url, "ada@acme.test", "Correct1horse")

	do(t, ctx, "submit again", chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	waitText(t, ctx, "#banner", "Invitation sent")
	waitText(t, ctx, "#users", "late@acme.test")
}

// TestBrowserSignedInAgainAsAnotherUserSendsNothing: a page whose session
// ended, in a browser since signed in as another user (of another company),
// sends nothing it kept as that user: it says so, and the form stays.
func TestBrowserSignedInAgainAsAnotherUserSendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Other", "bo@other.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "type an invitation", chromedp.Navigate(e.url+"/console/team"), chromedp.SendKeys(field("email"), "late@acme.test"),
		chromedp.SendKeys(field("firstName"), "Late"), chromedp.SendKeys(field("lastName"), "Comer"))
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	other, cancel := chromedp.NewContext(ctx)
	defer cancel()
	signInUI(t, other, e.url, "bo@other.test", "Correct1horse")

	do(t, ctx, "submit", chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	waitText(t, ctx, "#banner", "signed in as another user")
	if got := eval[string](t, ctx, `document.querySelector('[name=email]').value`); got != "late@acme.test" {
		t.Errorf("the field holds %q", got)
	}
	if _, err := e.store.UserByEmail("late@acme.test"); err == nil {
		t.Error("the invitation typed for Acme was sent as Other's admin")
	}
}

// TestBrowserLiveViewComesBackAfterSigningInAgain: the live view ended by
// its session's end ("signedout") opens again once the page has the new
// session, and the thread is reloaded for what was missed.
func TestBrowserLiveViewComesBackAfterSigningInAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{Heartbeat: 200 * time.Millisecond} })
	e.acmeWithPhone()
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"))
	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	eval[bool](t, ctx, `window.sameLoad = true`)
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#banner", "session has expired")

	other, cancel := chromedp.NewContext(ctx)
	defer cancel()
	signInUI(t, other, e.url, "ada@acme.test", "Correct1horse")

	do(t, ctx, "send", chromedp.SendKeys(field("message"), "after signing in again"), chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	waitText(t, ctx, "#thread", "after signing in again")
	waitFor(t, ctx, "the stream open again", `document.getElementById("chat").dataset.live === "true"`)
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
}

// TestBrowserSignedInAgainUnseenThenSend: a browser signed in again in
// another tab (after a sign-out there, say) before this page learnt that
// its session ended: the form's token is refused (403, nothing changed),
// and the page sends it once more with the new session's, the same user's.
func TestBrowserSignedInAgainUnseenThenSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "type an invitation", chromedp.Navigate(e.url+"/console/team"), chromedp.SendKeys(field("email"), "late@acme.test"),
		chromedp.SendKeys(field("firstName"), "Late"), chromedp.SendKeys(field("lastName"), "Comer"))
	other, cancel := chromedp.NewContext(ctx)
	defer cancel()
	signInUI(t, other, e.url, "ada@acme.test", "Correct1horse") // ends the session the page was drawn for

	do(t, ctx, "submit", chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	waitText(t, ctx, "#banner", "Invitation sent")
	waitText(t, ctx, "#users", "late@acme.test")
}

// heldReload holds, once hold is set, the answer of a page's reload (the
// requests reload tells) after reading it, until free; a send (the
// requests send tells) is stored only after that answer was read. So the
// reload was read before the message sent, and answers after the page drew
// it. delivered is told when the held answer went out.
type heldReload struct {
	hold      atomic.Bool
	read      chan struct{}
	release   chan struct{}
	delivered chan struct{}
	once      sync.Once
}

func holdReload(t *testing.T, reload, send func(path string) bool) (*heldReload, func(o *envOptions)) {
	h := &heldReload{read: make(chan struct{}, 1), release: make(chan struct{}), delivered: make(chan struct{}, 1)}
	t.Cleanup(h.free)
	return h, func(o *envOptions) {
		o.streams = web.StreamConfig{Heartbeat: 200 * time.Millisecond}
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case !h.hold.Load():
				case reload(r.URL.Path):
					rec := httptest.NewRecorder()
					next.ServeHTTP(rec, r)
					select {
					case h.read <- struct{}{}:
					default:
					}
					<-h.release
					maps.Copy(w.Header(), rec.Header())
					w.WriteHeader(rec.Code)
					_, _ = w.Write(rec.Body.Bytes())
					select {
					case h.delivered <- struct{}{}:
					default:
					}
					return
				case send(r.URL.Path):
					select { // the send is stored after the reload's answer was read
					case <-h.read:
					case <-time.After(browserTimeout / 2):
					}
				}
				next.ServeHTTP(w, r)
			})
		}
	}
}

// free lets the held reload answer.
func (h *heldReload) free() { h.once.Do(func() { close(h.release) }) }

// answered frees the held reload and waits until it answered.
func (h *heldReload) answered(t *testing.T) {
	t.Helper()
	h.free()
	select {
	case <-h.delivered:
	case <-time.After(browserTimeout):
		t.Fatal("the held reload was never answered")
	}
}

// endSessionAndSignInElsewhere ends the page's session and signs in again
// in another tab: the page's live view comes back, and reloads what it may
// have missed.
func endSessionAndSignInElsewhere(t *testing.T, e *env, ctx context.Context) {
	t.Helper()
	if err := e.store.RevokeUserSessions(1); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#banner", "session has expired")
	other, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	signInUI(t, other, e.url, "ada@acme.test", "Correct1horse")
}

// TestBrowserThreadReloadReadBeforeASendKeepsIt: the thread's reload that
// the live view's return asks for (events may have been missed) was read
// before a message sent meanwhile, and answered after the page drew it:
// the page drew the thread anew from that answer, and the message sent
// was gone from it (TestBrowserLiveViewComesBackAfterSigningInAgain failed
// so on a loaded machine). Here the server holds that reload's answer,
// read before the send, until the page has drawn the message.
func TestBrowserThreadReloadReadBeforeASendKeepsIt(t *testing.T) {
	t.Parallel()
	h, opt := holdReload(t,
		func(p string) bool { return p == "/console/messages/thread" },
		func(p string) bool { return p == "/console/messages/send" })
	e := newEnv(t, opt)
	e.acmeWithPhone()
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"))
	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	endSessionAndSignInElsewhere(t, e, ctx)

	h.hold.Store(true)
	do(t, ctx, "send", chromedp.SendKeys(field("message"), "sent while the view came back"), chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	waitText(t, ctx, "#thread", "sent while the view came back")
	eval[bool](t, ctx, `(document.querySelectorAll("#thread [data-id]").forEach(function (m) { m.dataset.before = "1"; }), true)`)
	h.answered(t)
	waitFor(t, ctx, "the reload drawn", `!document.querySelector("#thread [data-before]")`)
	if got := eval[string](t, ctx, `document.getElementById("thread").textContent`); !strings.Contains(got, "sent while the view came back") {
		t.Fatalf("the thread after the reload read before the send: %q, want the message sent", got)
	}
}

// TestBrowserNumberReloadReadBeforeASendKeepsIt: the same on a WhatsApp
// number's page, whose list of messages the live view's return reloads
// too: a message sent while that reload was on its way was drawn, then
// wiped by its answer, read before it. The page watches its list: the
// message, once drawn, never leaves it (a later status could have drawn it
// again, hiding that it was wiped).
func TestBrowserNumberReloadReadBeforeASendKeepsIt(t *testing.T) {
	t.Parallel()
	h, opt := holdReload(t,
		func(p string) bool {
			return strings.HasPrefix(p, "/console/numbers/") && strings.HasSuffix(p, "/messages")
		},
		func(p string) bool { return strings.HasPrefix(p, "/console/numbers/") && strings.HasSuffix(p, "/send") })
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, false)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the numbers", chromedp.Navigate(e.url+"/console/numbers"))
	do(t, ctx, "open the number", chromedp.Click(chromedp.CSS("#number-"+wa+" a")), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	waitFor(t, ctx, "the stream open", `document.getElementById("agent-msgs").dataset.live === "true"`)
	endSessionAndSignInElsewhere(t, e, ctx)

	h.hold.Store(true)
	do(t, ctx, "send", chromedp.SendKeys(field("to"), "+15550100999"), chromedp.SendKeys(field("content"), "sent while the view came back"),
		chromedp.Click(chromedp.CSS(`#agent-send button[type=submit]`)))
	waitText(t, ctx, "#agent-msgs", "sent while the view came back")
	eval[bool](t, ctx, `(function () {
		var list = document.getElementById("agent-msgs");
		list.querySelectorAll("[data-id]").forEach(function (m) { m.dataset.before = "1"; });
		new MutationObserver(function () {
			if (list.textContent.indexOf("sent while the view came back") < 0) { window.wiped = true; }
		}).observe(list, {childList: true, subtree: true, characterData: true});
		return true;
	})()`)
	h.answered(t)
	waitFor(t, ctx, "the reload drawn", `!document.querySelector("#agent-msgs [data-before]")`)
	if got := eval[string](t, ctx, `document.getElementById("agent-msgs").textContent`); !strings.Contains(got, "sent while the view came back") {
		t.Fatalf("the number's messages after the reload read before the send: %q, want the message sent", got)
	}
	if eval[bool](t, ctx, `window.wiped === true`) {
		t.Fatal("the reload read before the send wiped the message sent from the list (drawn again later)")
	}
}
