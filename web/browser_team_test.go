package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserRoleErrorBesideTheRole: demoting the company's last admin
// from the team page is refused with the message beside that user's role
// (and in the banner), the select marked invalid and focused, and nothing
// beside the invitation's role; it showed in the banner alone.
func TestBrowserRoleErrorBesideTheRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the team page", chromedp.Navigate(e.url+"/console/team"))
	sel := eval[string](t, ctx, `document.querySelector('form[action$="/role"] select').id`)
	if !strings.HasPrefix(sel, "role-") {
		t.Fatalf("the role form's select is %q", sel)
	}
	id := strings.TrimPrefix(sel, "role-")
	do(t, ctx, "demote the last admin", chromedp.SetValue(chromedp.CSS("#"+sel), "member"),
		chromedp.Click(chromedp.CSS(`form[action="/console/team/`+id+`/role"] button[type=submit]`)))
	waitText(t, ctx, "#err-role-"+id, "The company must keep at least one admin.")
	waitText(t, ctx, "#banner", "The company must keep at least one admin.")
	if got := eval[string](t, ctx, `document.activeElement.id + " " + document.getElementById("`+sel+`").getAttribute("aria-invalid")`); got != sel+" true" {
		t.Errorf("focus and aria-invalid: %q, want the role select focused and invalid", got)
	}
	if got := eval[string](t, ctx, `document.getElementById("err-role-invite").textContent`); got != "" {
		t.Errorf("the invitation's role shows %q", got)
	}
}
