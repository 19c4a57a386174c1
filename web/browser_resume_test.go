package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

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
