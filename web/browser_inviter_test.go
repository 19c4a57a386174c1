package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/store"
)

// TestBrowserTeamSaysWhoInvited: the team page's "Invited by" names the
// user who sent each invitation, pending or accepted, nothing for the
// first admin, and says a removed user's, with its id, once that user is
// gone, so that the company can review a removed admin's invitees.
func TestBrowserTeamSaysWhoInvited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, ada, _, err := e.accounts.CreateCompany("Acme", account.OwnerInput{Email: "ada@acme.test", Password: "Correct1horse", FirstName: "Ada", LastName: "Lo"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "invite Mo", append(append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.url + "/console/team")},
		fill(map[string]string{"email": "mo@acme.test", "firstName": "Mo", "lastName": "Ng"})...),
		chromedp.SetValue(chromedp.CSS("#inv-role"), "admin"),
		chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))...)
	waitText(t, ctx, "#banner", "Invitation sent")
	users, err := e.accounts.Users(t.Context(), account.Principal{CompanyID: c.ID, UserID: ada.ID, Role: store.RoleAdmin})
	if err != nil || len(users) != 2 || users[1].Email != "mo@acme.test" {
		t.Fatalf("users after Mo's invitation: %+v (%v)", users, err)
	}
	mo := users[1]
	zed, err := e.accounts.Invite(t.Context(), account.Principal{CompanyID: c.ID, UserID: mo.ID, Role: store.RoleAdmin},
		account.InviteInput{FirstName: "Zed", LastName: "Ray", Email: "zed@acme.test", Role: store.RoleMember})
	if err != nil {
		t.Fatal(err)
	}
	invitedBy := func(u store.User) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector('#users tr[data-user="%d"] td.inviter').textContent`, u.ID))
	}
	do(t, ctx, "open the team page", chromedp.Navigate(e.url+"/console/team"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-user="%d"]`, zed.ID))))
	for _, tc := range []struct {
		u    store.User
		want string
	}{{ada, ""}, {mo, "Ada Lo"}, {zed, "Mo Ng"}} {
		if got := invitedBy(tc.u); got != tc.want {
			t.Errorf("%s invited by %q, want %q", tc.u.Email, got, tc.want)
		}
	}
	if got := eval[string](t, ctx, `document.querySelector('#users thead').textContent`); !strings.Contains(got, "Invited by") {
		t.Errorf("the team's headings: %q", got)
	}

	if err := e.accounts.DeleteUser(t.Context(), account.Principal{CompanyID: c.ID, UserID: ada.ID, Role: store.RoleAdmin}, mo.ID); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "open the team page again", chromedp.Navigate(e.url+"/console/team"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-user="%d"]`, zed.ID))))
	if want := fmt.Sprintf("a removed user (#%d)", mo.ID); invitedBy(zed) != want {
		t.Errorf("Zed, Mo removed, invited by %q, want %q", invitedBy(zed), want)
	}
}
