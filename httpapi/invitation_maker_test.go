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

// TestInvitationNamesItsInviter: a user keeps the id of the user who
// invited it (invitedBy), pending and accepted, listed and alone, after
// that user is removed too, so that the company can review a removed
// admin's invitees; null for the signed-up owner and for an invitation
// made with the API key, which acts for the company, not for a person.
// The activity line names the inviter.
func TestInvitationNamesItsInviter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	r := e.do(call{method: "POST", path: "/users", token: a.apiKey, body: map[string]any{"firstName": "Mo", "lastName": "Ng", "email": "mo@acme.test", "role": "admin"}})
	e.want(r, http.StatusCreated, "")
	if by, ok := r.Body["invitedBy"]; !ok || by != nil {
		t.Fatalf("invited with the API key: invitedBy %v (present %v), want null", by, ok)
	}
	moID := r.Body["id"].(float64)
	link := mailtest.LinkToken(e.inbox.WaitFor(t, "mo@acme.test", 10*time.Second).Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": link, "password": goodPassword}}), http.StatusOK, "")
	mo, _ := e.login("mo@acme.test", goodPassword)

	r = e.do(call{method: "POST", path: "/users", token: mo, body: map[string]any{"firstName": "Zed", "lastName": "Ray", "email": "zed@acme.test", "role": "member"}})
	e.want(r, http.StatusCreated, "")
	if r.Body["invitedBy"] != moID {
		t.Fatalf("invited by Mo (%v): invitedBy %v", moID, r.Body["invitedBy"])
	}
	zedLink := mailtest.LinkToken(e.inbox.WaitFor(t, "zed@acme.test", 10*time.Second).Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/users", token: a.access, body: map[string]any{"firstName": "Lee", "lastName": "Ko", "email": "lee@acme.test", "role": "member"}}), http.StatusCreated, "")

	sum := e.do(call{method: "GET", path: "/dashboard/summary", token: a.apiKey})
	e.want(sum, http.StatusOK, "")
	lines := map[string]bool{}
	for _, it := range sum.Body["recentActivity"].([]any) {
		lines[it.(map[string]any)["description"].(string)] = true
	}
	for _, want := range []string{"mo@acme.test invited as admin", "zed@acme.test invited as member by mo@acme.test", "lee@acme.test invited as member by ana@acme.test"} {
		if !lines[want] {
			t.Errorf("recentActivity lacks %q: %s", want, sum.Raw)
		}
	}

	e.want(e.do(call{method: "DELETE", path: "/users/" + numberString(moID), token: a.apiKey}), http.StatusOK, "")
	wantBy := map[string]any{"ana@acme.test": nil, "zed@acme.test": moID, "lee@acme.test": a.adminID}
	list := e.do(call{method: "GET", path: "/users", token: a.apiKey})
	e.want(list, http.StatusOK, "")
	users := list.Body["users"].([]any)
	if len(users) != len(wantBy) {
		t.Fatalf("users after Mo's removal: %s, want %d", list.Raw, len(wantBy))
	}
	for _, u := range users {
		u := u.(map[string]any)
		if by, ok := u["invitedBy"]; !ok || by != wantBy[u["email"].(string)] {
			t.Errorf("%s: invitedBy %v (present %v), want %v", u["email"], by, ok, wantBy[u["email"].(string)])
		}
	}

	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": zedLink, "password": goodPassword}}), http.StatusOK, "")
	zed, _ := e.login("zed@acme.test", goodPassword)
	me := e.do(call{method: "GET", path: "/users/me", token: zed})
	e.want(me, http.StatusOK, "")
	if me.Body["invitedBy"] != moID || me.Body["emailVerified"] != true {
		t.Fatalf("Zed, accepted, after Mo's removal: %s, want invitedBy %v", me.Raw, moID)
	}
}
