package httpapi_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
)

// invitesMails returns the mails to addr once there are at least n, oldest first.
func invitesMails(t *testing.T, e *env, addr string, n int) []mailtest.Received {
	t.Helper()
	var got []mailtest.Received
	poll.Until(t, "mail to "+addr, func() bool {
		got = got[:0]
		for _, m := range e.inbox.Messages() {
			for _, to := range m.To {
				if strings.EqualFold(to, addr) {
					got = append(got, m)
				}
			}
		}
		return len(got) >= n
	})
	return got
}

func invitesKeys(m map[string]any) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

// TestInvitationHoldsNoAddress: a pending invitation is the inviting
// company's business: it blocks nobody's signup, and inviting says nothing
// about whether an address has an account elsewhere.
func TestInvitationHoldsNoAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")

	// B invites the victim before the victim ever signed up: the victim's own signup still works.
	pendingB := usersInvite(t, e, b.access, "Vic", "victim@x.test", "member")
	bLink := mailtest.LinkToken(invitesMails(t, e, "victim@x.test", 1)[0].Text, "/reset-password")
	if bLink == "" {
		t.Fatal("B's invitation to a fresh address has no set-password link")
	}
	e.want(e.do(call{method: "POST", path: "/auth/signup", body: signupBody("VICTIM@x.test", goodPassword)}), http.StatusCreated, "")
	verify := mailtest.LinkToken(invitesMails(t, e, "victim@x.test", 2)[1].Text, "/verify-email")
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": verify}}), http.StatusOK, "")

	// B's old invitation cannot take the address over now; the victim's password still signs in.
	r := e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": bLink, "password": usersPassword}})
	e.want(r, http.StatusConflict, "conflict")
	e.login("victim@x.test", goodPassword)
	usersWant(t, e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": "victim@x.test", "password": usersPassword}}), http.StatusUnauthorized, "invalid_credentials", "")

	// Inviting an address that has an account elsewhere answers exactly as a fresh invitation does.
	fresh := usersInvite(t, e, b.access, "Fay", "fresh@x.test", "member")
	held := usersInvite(t, e, b.access, "Ana", "owner@acme.test", "member")
	if !reflect.DeepEqual(invitesKeys(fresh), invitesKeys(held)) || held["emailVerified"] != false || held["role"] != "member" {
		t.Fatalf("invite of a held address: got %v, want the shape of a fresh one %v", held, fresh)
	}
	// Its owner alone hears why it cannot be accepted, and gets no link to accept it with.
	mails := invitesMails(t, e, "owner@acme.test", 2) // the verification, then the invitation
	if m := mails[1]; !strings.Contains(m.Text, "already has a simrelay account") || mailtest.LinkToken(m.Text, "/reset-password") != "" {
		t.Fatalf("invitation to a held address: got %q, want the explanation and no set-password link", m.Text)
	}
	e.login("owner@acme.test", goodPassword)
	// B lists the pending invitee as any other; A's owner is still A's admin alone.
	if got := usersRole(t, e, a.access, a.adminID); got != "admin" {
		t.Fatalf("A's owner: got role %q", got)
	}

	// Within one company an address is there once: 409 is no cross-tenant oracle.
	usersWant(t, e.do(call{method: "POST", path: "/users", token: b.access, body: map[string]any{"firstName": "F", "lastName": "X", "email": "FRESH@x.test", "role": "member"}}), http.StatusConflict, "conflict", "")
	// Signup with an address an account holds stays 409.
	usersWant(t, e.do(call{method: "POST", path: "/auth/signup", body: signupBody("owner@acme.test", goodPassword)}), http.StatusConflict, "conflict", "")

	// Removing B's pending invitee frees nothing of the victim's.
	e.want(e.do(call{method: "DELETE", path: usersPath(pendingB["id"].(float64)), token: b.access}), http.StatusOK, "")
	usersWant(t, e.do(call{method: "POST", path: "/auth/signup", body: signupBody("victim@x.test", goodPassword)}), http.StatusConflict, "conflict", "")
	e.login("victim@x.test", goodPassword)

	// Two companies invite one fresh address: the first accepted wins, the other answers 409 to its owner.
	usersInvite(t, e, a.access, "Two", "two@x.test", "member")
	usersInvite(t, e, b.access, "Two", "two@x.test", "member")
	links := invitesMails(t, e, "two@x.test", 2)
	first := mailtest.LinkToken(links[0].Text, "/reset-password")
	second := mailtest.LinkToken(links[1].Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": first, "password": usersPassword}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": second, "password": "Other-pass-99"}}), http.StatusConflict, "conflict")
	access, _ := e.login("two@x.test", usersPassword)
	if me := e.do(call{method: "GET", path: "/users/me", token: access}); me.Status != http.StatusOK {
		t.Fatalf("GET /users/me of the accepted invitee: %d", me.Status)
	}
	if co := e.do(call{method: "GET", path: "/company", token: access}); co.str("name") != "Acme" {
		t.Fatalf("the invitee who accepted A's invitation belongs to %q, want Acme", co.str("name"))
	}
}

// TestInvitesStopAtTheUserLimit: a company holds at most store.MaxUsers
// users, pending invitations included; the invitation over it answers 409
// conflict and sends no mail, and another company still invites.
func TestInvitesStopAtTheUserLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	// The admin is the first user, members the next, and a pending
	// invitation the last: the company is full only if it counts. The
	// members are created, not invited: each invitation reads all of the
	// company's users to refuse an address twice, and a thousand of them
	// took most of this test's 20 to 45 s with the race detector.
	for i := range store.MaxUsers - 2 {
		u := store.User{CompanyID: uint64(a.id), FirstName: "Bo", Email: fmt.Sprintf("bo%d@acme.test", i), Role: store.RoleMember, CreatedAt: time.Now()}
		if err := e.store.CreateUser(&u); err != nil {
			t.Fatal(err)
		}
	}
	pending := store.User{CompanyID: uint64(a.id), FirstName: "Pat", Email: "pat@acme.test", Role: store.RoleMember, CreatedAt: time.Now()}
	if _, err := e.store.InviteUser(&pending, time.Now()); err != nil {
		t.Fatal(err)
	}
	invite := func(token, email string) resp {
		return e.do(call{method: "POST", path: "/users", token: token, body: map[string]any{"firstName": "Ivy", "lastName": "Ng", "email": email, "role": "member"}})
	}
	r := invite(a.apiKey, "ivy@acme.test")
	e.want(r, http.StatusConflict, "conflict")
	if !strings.Contains(r.str("message"), "at most 1000 users") {
		t.Errorf("message %q does not name the limit", r.str("message"))
	}
	e.want(invite(b.apiKey, "ivy@beta.test"), http.StatusCreated, "")
	invitesMails(t, e, "ivy@beta.test", 1)
	for _, m := range e.inbox.Messages() {
		for _, to := range m.To {
			if strings.EqualFold(to, "ivy@acme.test") {
				t.Fatal("the refused invitation was mailed")
			}
		}
	}
}
