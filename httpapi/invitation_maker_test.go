package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
)

// An invitation is the company's, not its inviter's (docs/api.md, Users):
// the invitee is a user of the company from the invitation on, listed by
// GET /users, and its link went to the invitee's mailbox, never to the
// admin who sent it. Removing that admin leaves it pending and its link
// working, as the company's other users stay; an admin ends it with DELETE
// /users/{id}. A pairing code is unlike it: shown to its maker, a
// credential in their hands, it ends with their removal.
func TestInvitationOutlivesItsInviter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	r := e.do(call{method: "POST", path: "/users", token: a.apiKey, body: map[string]any{"firstName": "Mo", "lastName": "Ng", "email": "mo@acme.test", "role": "admin"}})
	e.want(r, http.StatusCreated, "")
	moID := numberString(r.Body["id"].(float64))
	link := mailtest.LinkToken(e.inbox.WaitFor(t, "mo@acme.test", 10*time.Second).Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": link, "password": goodPassword}}), http.StatusOK, "")
	mo, _ := e.login("mo@acme.test", goodPassword)

	e.want(e.do(call{method: "POST", path: "/users", token: mo, body: map[string]any{"firstName": "Zed", "lastName": "Ray", "email": "zed@acme.test", "role": "member"}}), http.StatusCreated, "")
	zedLink := mailtest.LinkToken(e.inbox.WaitFor(t, "zed@acme.test", 10*time.Second).Text, "/reset-password")
	e.want(e.do(call{method: "DELETE", path: "/users/" + moID, token: a.apiKey}), http.StatusOK, "")

	list := e.do(call{method: "GET", path: "/users", token: a.apiKey})
	e.want(list, http.StatusOK, "")
	pending := false
	for _, u := range list.Body["users"].([]any) {
		if u.(map[string]any)["email"] == "zed@acme.test" {
			pending = true
		}
	}
	if !pending {
		t.Fatalf("the removed admin's invitation is not listed: %s", list.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": zedLink, "password": goodPassword}}), http.StatusOK, "")
	e.login("zed@acme.test", goodPassword)
}
