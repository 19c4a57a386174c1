package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/mail/mailtest"
)

// The team page marks a user whose address is not verified: "invited" for
// an invitation not accepted yet, "unverified" for the owner a sign-up made
// who has not followed the verification link (store.SignupOwnerUnverified),
// who was invited by nobody. Before, the owner read "invited" too.
func TestTeamPageTellsAnUnverifiedOwnerFromAnInvitee(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, owner, err := e.accounts.Signup(t.Context(), account.SignupInput{
		Company: account.CompanyInput{Name: "Acme", Phone: "+15550109000", Country: "US"},
		Owner:   account.OwnerInput{FirstName: "Owen", LastName: "Owner", Email: "owen@acme.test", Password: "Correct1horse"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The API key invites an admin, who accepts, and another, who has not.
	key := account.Principal{CompanyID: c.ID, Role: "admin", ViaAPIKey: true}
	for _, email := range []string{"ada@acme.test", "ivy@acme.test"} {
		if _, err := e.accounts.Invite(t.Context(), key, account.InviteInput{FirstName: "X", LastName: email[:3], Email: email, Role: "admin"}); err != nil {
			t.Fatal(err)
		}
	}
	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "ada@acme.test", 10*time.Second).Text, "/reset-password")
	ada := e.browser()
	anon := tokenOf(t, ada.get("/reset-password?token="+tok))
	if p := ada.post("/reset-password", url.Values{"csrf": {anon}, "token": {tok}, "password": {"Admin1pass"}, "password2": {"Admin1pass"}}); p.status != http.StatusOK {
		t.Fatalf("reset: %d %s", p.status, p.body)
	}
	ada.signIn("ada@acme.test", "Admin1pass")

	p := ada.get("/console/team")
	if p.status != http.StatusOK {
		t.Fatalf("GET /console/team: %d", p.status)
	}
	row := regexp.MustCompile(`(?s)<tr data-user="(\d+)">\s*<td>(.*?)</td>`)
	badge := regexp.MustCompile(`<span class="badge[^"]*">([^<]*)</span>`)
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(p.body, -1) {
		b := ""
		if bm := badge.FindStringSubmatch(m[2]); bm != nil {
			b = html.UnescapeString(bm[1])
		}
		got[m[1]] = b
	}
	users, err := e.store.CompanyUsers(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, u := range users {
		switch u.Email {
		case owner.Email:
			want[strconv.FormatUint(u.ID, 10)] = "unverified"
		case "ada@acme.test":
			want[strconv.FormatUint(u.ID, 10)] = ""
		case "ivy@acme.test":
			want[strconv.FormatUint(u.ID, 10)] = "invited"
		}
	}
	if len(want) != 3 || len(got) != 3 {
		t.Fatalf("users %v, team page rows %v", want, got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("user %s: badge %q, want %q", id, got[id], w)
		}
	}
}
