package web_test

import (
	"errors"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
)

// An admin closes the company from the settings page: a name that is not
// the company's is refused beside the field, and nothing changes; the
// company's name, confirmed, signs everyone out and lands on the sign-in
// page with the notice; the company is then removed in the background,
// and its admin can no longer sign in.
func TestBrowserAdminClosesTheCompany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme Closing", "ada@acme.test", "Correct1horse")
	owner, err := e.store.UserByEmail("ada@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the settings", chromedp.Navigate(e.url+"/console/settings"), chromedp.WaitVisible(chromedp.CSS(`#close-company`)))
	// The page asks before it posts; the test answers yes.
	eval[bool](t, ctx, `(window.confirm = function () { return true; }, true)`)
	do(t, ctx, "close with another name", chromedp.SendKeys(field("confirm"), "acme closing"), chromedp.Click(chromedp.CSS(`#close-company button[type=submit]`)))
	waitFor(t, ctx, "the confirm error", `document.querySelector('[data-error-for="confirm"]').textContent.indexOf("exactly") >= 0`)
	if co, err := e.store.Company(owner.CompanyID); err != nil || !co.ClosingAt.IsZero() {
		t.Fatalf("the company after a refused closing: %+v (%v), want it open", co, err)
	}
	do(t, ctx, "close", chromedp.SetValue(field("confirm"), "Acme Closing"), chromedp.Click(chromedp.CSS(`#close-company button[type=submit]`)))
	waitFor(t, ctx, "the sign-in page", `location.pathname === "/console/signin" && document.readyState === "complete"`)
	waitText(t, ctx, "#banner", "Acme Closing is closed")
	poll.Until(t, "the company removed", func() bool {
		_, err := e.store.Company(owner.CompanyID)
		return errors.Is(err, store.ErrNotFound)
	})
	do(t, ctx, "sign in again", append(fill(map[string]string{"email": "ada@acme.test", "password": "Correct1horse"}),
		chromedp.Click(chromedp.CSS(`main button[type=submit]`)))...)
	waitFor(t, ctx, "the sign-in error", `document.getElementById("banner").textContent.length > 0 && location.pathname === "/console/signin"`)
}
