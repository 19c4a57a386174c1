package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserFocusGoesToTheOutcomeOfAnAction: the page an action leads to
// puts focus on what it says: the banner ("Invitation sent ..."), or after
// a plain post refused, the field its error names. Focus stayed at the top
// of the new page, where a screen reader reads nothing of the outcome (a
// live region filled as the page loads is not announced).
func TestBrowserFocusGoesToTheOutcomeOfAnAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "invite", append(append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.url + "/console/team")},
		fill(map[string]string{"email": "mo@acme.test", "firstName": "Mo", "lastName": "Member"})...),
		chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))...)
	waitText(t, ctx, "#banner", "Invitation sent")
	waitFor(t, ctx, "focus on the banner", `document.activeElement === document.getElementById("banner")`)

	// A plain post (the form sent without the script's handler) refused
	// beside a field comes back with the field focused.
	do(t, ctx, "a plain post", chromedp.Navigate(e.url+"/console/team"), chromedp.WaitVisible(chromedp.CSS(`#invite`)),
		chromedp.SetValue(field("email"), "not an address"), chromedp.SetValue(field("firstName"), "X"), chromedp.SetValue(field("lastName"), "Y"))
	eval[bool](t, ctx, `HTMLFormElement.prototype.submit.call(document.getElementById("invite")), true`)
	waitFor(t, ctx, "the error beside the e-mail", `location.search.indexOf("err=") >= 0 && document.querySelector('#invite [data-error-for="email"]').textContent.length > 0`)
	waitFor(t, ctx, "focus on the e-mail field", `document.activeElement === document.querySelector('#invite [name="email"]')`)
}
