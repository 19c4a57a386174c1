package httpapi_test

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
)

// usersTimeLayout is the contract's timestamp: RFC 3339, UTC, milliseconds.
const usersTimeLayout = "2006-01-02T15:04:05.000Z"

// usersPassword is the password invitees set through their link.
const usersPassword = "Member-pass-7"

var (
	usersTimestamp = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
	usersAPIKey    = regexp.MustCompile(`^sk_[0-9A-Za-z]{40}$`)
	usersUserKeys  = []string{"createdAt", "email", "emailVerified", "firstName", "id", "invitedBy", "lastName", "phone", "role"}
	usersCompKeys  = []string{"address", "city", "country", "createdAt", "id", "name", "phone", "state"}
)

// usersEnvFor is e reporting to t, so helpers that fail a test fail the
// subtest that runs them, from its own goroutine.
func usersEnvFor(e *env, t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func usersPath(id float64) string { return fmt.Sprintf("/users/%d", uint64(id)) }

// usersWant fails t unless r is the error status with this code and field
// ("" for a body without one).
func usersWant(t *testing.T, r resp, status int, code, field string) {
	t.Helper()
	if r.Status != status || r.str("error") != code || r.str("field") != field {
		t.Fatalf("got %d error %q field %q (body %s), want %d error %q field %q", r.Status, r.str("error"), r.str("field"), r.Raw, status, code, field)
	}
	if r.str("message") == "" {
		t.Fatalf("got an error body without a message: %s", r.Raw)
	}
}

// usersCheckShape checks that obj has exactly the keys, that createdAt is an
// RFC 3339 UTC timestamp with milliseconds, and that it holds the wanted values.
func usersCheckShape(t *testing.T, what string, obj map[string]any, keys []string, want map[string]any) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(obj)); !reflect.DeepEqual(got, keys) {
		t.Errorf("%s: got keys %v, want %v", what, got, keys)
	}
	if _, ok := obj["id"].(float64); !ok {
		t.Errorf("%s: got id %#v, want an integer", what, obj["id"])
	}
	at, _ := obj["createdAt"].(string)
	if !usersTimestamp.MatchString(at) {
		t.Errorf("%s: got createdAt %q, want RFC 3339 UTC with milliseconds", what, at)
	} else if _, err := time.Parse(usersTimeLayout, at); err != nil {
		t.Errorf("%s: got createdAt %q, want a valid time: %v", what, at, err)
	}
	for k, v := range want {
		if obj[k] != v {
			t.Errorf("%s: got %s %#v, want %#v", what, k, obj[k], v)
		}
	}
}

// usersList returns GET /users as seen by token.
func usersList(t *testing.T, e *env, token string) []map[string]any {
	t.Helper()
	r := e.do(call{method: "GET", path: "/users", token: token})
	if r.Status != http.StatusOK {
		t.Fatalf("GET /users: got %d %s, want 200", r.Status, r.Raw)
	}
	raw, ok := r.Body["users"].([]any)
	if !ok {
		t.Fatalf("GET /users: got %s, want {users: [...]}", r.Raw)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, u := range raw {
		m, ok := u.(map[string]any)
		if !ok {
			t.Fatalf("GET /users: got item %#v, want an object", u)
		}
		out = append(out, m)
	}
	return out
}

func usersIDs(users []map[string]any) []float64 {
	ids := make([]float64, 0, len(users))
	for _, u := range users {
		id, _ := u["id"].(float64)
		ids = append(ids, id)
	}
	return ids
}

// usersFind returns the user with this id from a list, or nil.
func usersFind(users []map[string]any, id float64) map[string]any {
	for _, u := range users {
		if u["id"] == id {
			return u
		}
	}
	return nil
}

// usersInvite invites through POST /users and checks the 201 answer.
func usersInvite(t *testing.T, e *env, token, first, email, role string) map[string]any {
	t.Helper()
	r := e.do(call{method: "POST", path: "/users", token: token, body: map[string]any{
		"firstName": first, "lastName": "Invitee", "email": email, "role": role,
	}})
	if r.Status != http.StatusCreated {
		t.Fatalf("invite %s: got %d %s, want 201", email, r.Status, r.Raw)
	}
	return r.Body
}

// usersAccept follows the invitation mail the way the invitee would: sets the
// password through the e-mailed reset link and logs in.
func usersAccept(t *testing.T, e *env, email string) (access, refresh string) {
	t.Helper()
	msg := e.inbox.WaitFor(t, email, 10*time.Second)
	tok := mailtest.LinkToken(msg.Text, "/reset-password")
	if tok == "" {
		t.Fatalf("invitation to %s: got no /reset-password link in %q", email, msg.Text)
	}
	r := e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": usersPassword}})
	if r.Status != http.StatusOK {
		t.Fatalf("set password of %s: got %d %s, want 200", email, r.Status, r.Raw)
	}
	return e.login(email, usersPassword)
}

type usersMember struct {
	id              float64
	email           string
	access, refresh string
}

// usersJoin invites a user with the role and completes their invitation.
func usersJoin(t *testing.T, e *env, token, first, email, role string) usersMember {
	t.Helper()
	u := usersInvite(t, e, token, first, email, role)
	m := usersMember{id: u["id"].(float64), email: email}
	m.access, m.refresh = usersAccept(t, e, email)
	return m
}

// usersRole reads a user's role through the admin's GET /users.
func usersRole(t *testing.T, e *env, token string, id float64) string {
	t.Helper()
	u := usersFind(usersList(t, e, token), id)
	if u == nil {
		t.Fatalf("user %v is not in GET /users", id)
	}
	role, _ := u["role"].(string)
	return role
}

func TestUsersMeShapeAndAPIKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	created := e.clock.Now().UTC().Format(usersTimeLayout)

	r := e.do(call{method: "GET", path: "/users/me", token: c.access})
	e.want(r, http.StatusOK, "")
	usersCheckShape(t, "GET /users/me", r.Body, usersUserKeys, map[string]any{
		"id": c.adminID, "firstName": "Ana", "lastName": "Admin", "email": "owner@acme.test", "phone": "",
		"role": "admin", "emailVerified": true, "createdAt": created, "invitedBy": nil,
	})

	// The API key is the company's, not a person's: it has no profile.
	usersWant(t, e.do(call{method: "GET", path: "/users/me", token: c.apiKey}), http.StatusForbidden, "user_token_required", "")
	usersWant(t, e.do(call{method: "PATCH", path: "/users/me", token: c.apiKey, body: map[string]any{"firstName": "Key"}}), http.StatusForbidden, "user_token_required", "")
	usersWant(t, e.do(call{method: "GET", path: "/users/me"}), http.StatusUnauthorized, "unauthorized", "")
}

func TestUsersMePatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")

	r := e.do(call{method: "PATCH", path: "/users/me", token: c.access, body: map[string]any{
		"firstName": "Anna", "lastName": "Adams", "phone": "+1 (555) 010-2000", "role": "member",
	}})
	e.want(r, http.StatusOK, "")
	want := map[string]any{"id": c.adminID, "firstName": "Anna", "lastName": "Adams", "phone": "+15550102000", "role": "admin", "email": c.email, "emailVerified": true}
	usersCheckShape(t, "PATCH /users/me", r.Body, usersUserKeys, want)

	// A body changes only the fields it carries.
	r = e.do(call{method: "PATCH", path: "/users/me", token: c.access, body: map[string]any{"lastName": "Admin"}})
	e.want(r, http.StatusOK, "")
	want["lastName"] = "Admin"
	usersCheckShape(t, "PATCH /users/me lastName only", r.Body, usersUserKeys, want)

	cases := []struct {
		name  string
		body  any
		code  string
		field string
	}{
		{"empty firstName", map[string]any{"firstName": ""}, "validation_failed", "firstName"},
		{"blank firstName", map[string]any{"firstName": "   "}, "validation_failed", "firstName"},
		{"empty lastName", map[string]any{"lastName": ""}, "validation_failed", "lastName"},
		{"phone without +", map[string]any{"phone": "15550102000"}, "validation_failed", "phone"},
		{"phone with letters", map[string]any{"phone": "+1 555 CALL NOW"}, "validation_failed", "phone"},
		{"phone too short", map[string]any{"phone": "+1234"}, "validation_failed", "phone"},
		{"valid name, bad phone", map[string]any{"firstName": "Changed", "phone": "555-0100"}, "validation_failed", "phone"},
		{"wrong type", map[string]any{"firstName": 5}, "validation_failed", "firstName"},
		{"malformed JSON", `{"firstName": `, "invalid_json", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := usersEnvFor(e, t)
			usersWant(t, se.do(call{method: "PATCH", path: "/users/me", token: c.access, body: tc.body}), http.StatusBadRequest, tc.code, tc.field)
		})
	}

	// Refused patches change nothing, not even their valid fields.
	r = e.do(call{method: "GET", path: "/users/me", token: c.access})
	e.want(r, http.StatusOK, "")
	usersCheckShape(t, "GET /users/me after refused patches", r.Body, usersUserKeys, want)
}

func TestInviteSetPasswordAndLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	e.clock.Advance(123 * time.Millisecond)

	r := e.do(call{method: "POST", path: "/users", token: c.access, body: map[string]any{
		"firstName": "Ben", "lastName": "Member", "email": "ben@acme.test", "phone": "+1 (555) 010-2001", "role": "member",
	}})
	e.want(r, http.StatusCreated, "")
	usersCheckShape(t, "POST /users", r.Body, usersUserKeys, map[string]any{
		"firstName": "Ben", "lastName": "Member", "email": "ben@acme.test", "phone": "+15550102001",
		"role": "member", "emailVerified": false, "createdAt": "2026-11-22T10:00:00.123Z", "invitedBy": c.adminID,
	})
	ben := r.Body["id"].(float64)
	if ben == c.adminID {
		t.Fatalf("got the invitee the admin's id %v, want a new one", ben)
	}

	// Oldest first: the admin, then the invitee.
	list := usersList(t, e, c.access)
	if got, want := usersIDs(list), []float64{c.adminID, ben}; !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /users: got ids %v, want %v", got, want)
	}
	usersCheckShape(t, "GET /users item", list[1], usersUserKeys, map[string]any{"id": ben, "role": "member", "emailVerified": false})

	// Without a password, the invitee cannot sign in yet.
	usersWant(t, e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": "ben@acme.test", "password": usersPassword}}), http.StatusUnauthorized, "invalid_credentials", "")

	msg := e.inbox.WaitFor(t, "ben@acme.test", 10*time.Second)
	if link := e.url + "/reset-password?token="; !strings.Contains(msg.Text, link) {
		t.Fatalf("invitation text: got %q, want a link starting %s", msg.Text, link)
	}
	tok := mailtest.LinkToken(msg.Text, "/reset-password")
	if tok == "" {
		t.Fatalf("invitation text: got no token in %q", msg.Text)
	}

	// An invitation outlives a reset link's hour.
	e.clock.Advance(2 * time.Hour)
	usersWant(t, e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "short"}}), http.StatusBadRequest, "validation_failed", "password")
	r = e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": usersPassword}})
	e.want(r, http.StatusOK, "")
	if r.str("message") == "" {
		t.Errorf("reset-password: got %s, want {message}", r.Raw)
	}
	usersWant(t, e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "Another-pass-8"}}), http.StatusBadRequest, "invalid_token", "")

	r = e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": "ben@acme.test", "password": usersPassword}})
	e.want(r, http.StatusOK, "")
	user, _ := r.Body["user"].(map[string]any)
	usersCheckShape(t, "login user", user, usersUserKeys, map[string]any{"id": ben, "role": "member", "emailVerified": true, "email": "ben@acme.test"})
	access := r.str("accessToken")

	r = e.do(call{method: "GET", path: "/users/me", token: access})
	e.want(r, http.StatusOK, "")
	usersCheckShape(t, "invitee's GET /users/me", r.Body, usersUserKeys, map[string]any{"id": ben, "role": "member", "emailVerified": true, "phone": "+15550102001"})
	if got := usersIDs(usersList(t, e, access)); len(got) != 2 {
		t.Errorf("the member's GET /users: got ids %v, want 2 users", got)
	}

	// An invitation expires after 7 days.
	admin, _ := e.login(c.email, c.password)
	usersInvite(t, e, admin, "Late", "late@acme.test", "member")
	late := mailtest.LinkToken(e.inbox.WaitFor(t, "late@acme.test", 10*time.Second).Text, "/reset-password")
	e.clock.Advance(7*24*time.Hour + time.Second)
	usersWant(t, e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": late, "password": usersPassword}}), http.StatusBadRequest, "invalid_token", "")
}

func TestInviteValidationAndConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.newCompany("Beta", "owner@beta.test")

	// The API key invites too: it acts as an admin.
	carol := usersInvite(t, e, a.apiKey, "Carol", "carol@acme.test", "member")
	e.inbox.WaitFor(t, "carol@acme.test", 10*time.Second)
	mailsBefore := len(e.inbox.Messages())

	body := func(change map[string]any) map[string]any {
		b := map[string]any{"firstName": "Dan", "lastName": "New", "email": "dan@acme.test", "role": "member"}
		for k, v := range change {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		field  string
	}{
		{"own admin's address in upper case", body(map[string]any{"email": "OWNER@ACME.TEST"}), http.StatusConflict, "conflict", ""},
		{"invited address in mixed case", body(map[string]any{"email": "Carol@Acme.Test"}), http.StatusConflict, "conflict", ""},
		{"invalid role", body(map[string]any{"role": "owner"}), http.StatusBadRequest, "validation_failed", "role"},
		{"missing role", body(map[string]any{"role": nil}), http.StatusBadRequest, "validation_failed", "role"},
		{"missing firstName", body(map[string]any{"firstName": nil}), http.StatusBadRequest, "validation_failed", "firstName"},
		{"blank firstName", body(map[string]any{"firstName": "  "}), http.StatusBadRequest, "validation_failed", "firstName"},
		{"bad email", body(map[string]any{"email": "not-an-email"}), http.StatusBadRequest, "validation_failed", "email"},
		{"missing email", body(map[string]any{"email": nil}), http.StatusBadRequest, "validation_failed", "email"},
		{"email with a display name", body(map[string]any{"email": "Dan <dan@acme.test>"}), http.StatusBadRequest, "validation_failed", "email"},
		{"phone without +", body(map[string]any{"phone": "5550102002"}), http.StatusBadRequest, "validation_failed", "phone"},
		{"malformed JSON", `{"email": "dan@acme.test"`, http.StatusBadRequest, "invalid_json", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := usersEnvFor(e, t)
			usersWant(t, se.do(call{method: "POST", path: "/users", token: a.access, body: tc.body}), tc.status, tc.code, tc.field)
		})
	}

	// The refused invitations made no user and sent no mail: a valid one
	// afterwards is the only new mail once it has arrived (one worker, in order).
	if got, want := usersIDs(usersList(t, e, a.access)), []float64{a.adminID, carol["id"].(float64)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /users after refused invitations: got ids %v, want %v", got, want)
	}
	usersInvite(t, e, a.access, "Dan", "dan@acme.test", "member")
	e.inbox.WaitFor(t, "dan@acme.test", 10*time.Second)
	if got := len(e.inbox.Messages()); got != mailsBefore+1 {
		t.Errorf("got %d new mails, want 1 (only the valid invitation's)", got-mailsBefore)
	}
}

func TestMemberForbiddenOnAdminRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	m := usersJoin(t, e, c.access, "Mia", "mia@acme.test", "member")

	admin := []struct {
		method, path string
		body         any
	}{
		{"GET", "/account/api-key", nil},
		{"POST", "/account/api-key/rotate", nil},
		{"POST", "/users", map[string]any{"firstName": "Eve", "lastName": "X", "email": "eve@acme.test", "role": "admin"}},
		{"PATCH", usersPath(c.adminID), map[string]any{"role": "member"}},
		{"PATCH", usersPath(m.id), map[string]any{"role": "admin"}},
		{"DELETE", usersPath(c.adminID), nil},
		{"DELETE", usersPath(m.id), nil},
		{"PATCH", "/company", map[string]any{"name": "Hijacked"}},
		{"DELETE", "/device/delete/any-phone", nil},
		{"PUT", "/webhooks/inbound-sms", map[string]any{"webhooks": []any{}}},
		{"POST", "/webhooks/signing-secret/rotate", nil},
		{"GET", "/company/export", nil},
		{"POST", "/billing/subscribe", map[string]any{"plan_id": "starter"}},
		{"POST", "/billing/portal", nil},
	}
	for _, tc := range admin {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			se := usersEnvFor(e, t)
			usersWant(t, se.do(call{method: tc.method, path: tc.path, token: m.access, body: tc.body}), http.StatusForbidden, "forbidden", "")
		})
	}
	for _, path := range []string{"/users", "/company", "/users/me"} {
		t.Run("GET "+path, func(t *testing.T) {
			se := usersEnvFor(e, t)
			if r := se.do(call{method: "GET", path: path, token: m.access}); r.Status != http.StatusOK {
				t.Fatalf("got %d %s, want 200", r.Status, r.Raw)
			}
		})
	}

	// A member edits their own profile, but cannot raise their role there.
	r := e.do(call{method: "PATCH", path: "/users/me", token: m.access, body: map[string]any{"lastName": "Miller", "role": "admin"}})
	e.want(r, http.StatusOK, "")
	if r.str("role") != "member" || r.str("lastName") != "Miller" {
		t.Errorf("member's PATCH /users/me: got role %q lastName %q, want member Miller", r.str("role"), r.str("lastName"))
	}

	// Nothing the member was refused happened.
	users := usersList(t, e, c.access)
	if got, want := usersIDs(users), []float64{c.adminID, m.id}; !reflect.DeepEqual(got, want) {
		t.Errorf("GET /users: got ids %v, want %v", got, want)
	}
	if got := usersRole(t, e, c.access, m.id); got != "member" {
		t.Errorf("member's role: got %q, want member", got)
	}
	if got := usersRole(t, e, c.access, c.adminID); got != "admin" {
		t.Errorf("admin's role: got %q, want admin", got)
	}
	k := e.do(call{method: "GET", path: "/account/api-key", token: c.access})
	e.want(k, http.StatusOK, "")
	if k.str("apiKey") != c.apiKey {
		t.Errorf("API key: got %q, want the unrotated %q", k.str("apiKey"), c.apiKey)
	}
	co := e.do(call{method: "GET", path: "/company", token: c.access})
	e.want(co, http.StatusOK, "")
	if co.str("name") != "Acme" {
		t.Errorf("company name: got %q, want Acme", co.str("name"))
	}
}

func TestCompanyIsolationOfUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	m := usersJoin(t, e, a.access, "Mia", "mia@acme.test", "member")
	before := usersList(t, e, a.access)

	missing := e.do(call{method: "PATCH", path: "/users/999999", token: b.access, body: map[string]any{"firstName": "X"}})
	usersWant(t, missing, http.StatusNotFound, "not_found", "")

	for _, cred := range []struct{ name, token string }{{"access token", b.access}, {"API key", b.apiKey}} {
		for _, target := range []struct {
			name string
			id   float64
		}{{"member", m.id}, {"admin", a.adminID}} {
			t.Run(cred.name+" on A's "+target.name, func(t *testing.T) {
				se := usersEnvFor(e, t)
				p := se.do(call{method: "PATCH", path: usersPath(target.id), token: cred.token, body: map[string]any{"firstName": "Hacked", "role": "admin"}})
				usersWant(t, p, http.StatusNotFound, "not_found", "")
				if p.str("message") != missing.str("message") {
					t.Errorf("PATCH of another company's user: got message %q, want the same as for no user %q", p.str("message"), missing.str("message"))
				}
				// Even an invalid body must not reveal that the user exists.
				usersWant(t, se.do(call{method: "PATCH", path: usersPath(target.id), token: cred.token, body: map[string]any{"firstName": ""}}), http.StatusNotFound, "not_found", "")
				usersWant(t, se.do(call{method: "DELETE", path: usersPath(target.id), token: cred.token}), http.StatusNotFound, "not_found", "")
			})
		}
	}

	// B sees only B's users, with either credential.
	for _, tok := range []string{b.access, b.apiKey} {
		if got, want := usersIDs(usersList(t, e, tok)), []float64{b.adminID}; !reflect.DeepEqual(got, want) {
			t.Errorf("B's GET /users: got ids %v, want %v", got, want)
		}
	}

	// A's users are untouched and the member still signs in.
	if after := usersList(t, e, a.access); !reflect.DeepEqual(after, before) {
		t.Errorf("A's users: got %v, want unchanged %v", after, before)
	}
	r := e.do(call{method: "GET", path: "/users/me", token: m.access})
	e.want(r, http.StatusOK, "")
	if r.str("firstName") != "Mia" || r.str("role") != "member" {
		t.Errorf("A's member: got %s, want Mia, member", r.Raw)
	}
}

func TestRolesPromoteDemoteLastAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	m := usersJoin(t, e, c.access, "Mia", "mia@acme.test", "member")

	// Promote: the member's existing access token gains admin rights at once.
	r := e.do(call{method: "PATCH", path: usersPath(m.id), token: c.access, body: map[string]any{"role": "admin"}})
	e.want(r, http.StatusOK, "")
	usersCheckShape(t, "promote", r.Body, usersUserKeys, map[string]any{"id": m.id, "role": "admin", "firstName": "Mia"})
	e.want(e.do(call{method: "GET", path: "/account/api-key", token: m.access}), http.StatusOK, "")

	// Demote: and loses them at once.
	r = e.do(call{method: "PATCH", path: usersPath(m.id), token: c.access, body: map[string]any{"role": "member"}})
	e.want(r, http.StatusOK, "")
	if r.str("role") != "member" {
		t.Fatalf("demote: got role %q, want member", r.str("role"))
	}
	usersWant(t, e.do(call{method: "GET", path: "/account/api-key", token: m.access}), http.StatusForbidden, "forbidden", "")

	// The last admin can be neither demoted nor deleted, by anyone.
	for _, cred := range []struct{ name, token string }{{"access token", c.access}, {"API key", c.apiKey}} {
		t.Run("last admin via "+cred.name, func(t *testing.T) {
			se := usersEnvFor(e, t)
			usersWant(t, se.do(call{method: "PATCH", path: usersPath(c.adminID), token: cred.token, body: map[string]any{"role": "member"}}), http.StatusConflict, "conflict", "")
			usersWant(t, se.do(call{method: "DELETE", path: usersPath(c.adminID), token: cred.token}), http.StatusConflict, "conflict", "")
		})
	}
	if got := usersRole(t, e, c.access, c.adminID); got != "admin" {
		t.Fatalf("the last admin's role: got %q, want admin", got)
	}
	// A PATCH that renames the last admin but keeps the role is fine.
	r = e.do(call{method: "PATCH", path: usersPath(c.adminID), token: c.apiKey, body: map[string]any{"firstName": "Anne", "role": "admin"}})
	e.want(r, http.StatusOK, "")
	if r.str("firstName") != "Anne" || r.str("role") != "admin" {
		t.Errorf("rename of the last admin: got %s, want Anne, admin", r.Raw)
	}

	// With two admins, one (here: themselves) can step down.
	e.want(e.do(call{method: "PATCH", path: usersPath(m.id), token: c.access, body: map[string]any{"role": "admin"}}), http.StatusOK, "")
	r = e.do(call{method: "PATCH", path: usersPath(c.adminID), token: c.access, body: map[string]any{"role": "member"}})
	e.want(r, http.StatusOK, "")
	if r.str("role") != "member" {
		t.Fatalf("demote one of two admins: got role %q, want member", r.str("role"))
	}
	usersWant(t, e.do(call{method: "GET", path: "/account/api-key", token: c.access}), http.StatusForbidden, "forbidden", "")

	// Now Mia is the last admin.
	usersWant(t, e.do(call{method: "PATCH", path: usersPath(m.id), token: m.access, body: map[string]any{"role": "member"}}), http.StatusConflict, "conflict", "")
	usersWant(t, e.do(call{method: "PATCH", path: usersPath(m.id), token: c.apiKey, body: map[string]any{"role": "member"}}), http.StatusConflict, "conflict", "")
	usersWant(t, e.do(call{method: "DELETE", path: usersPath(m.id), token: c.apiKey}), http.StatusConflict, "conflict", "")
	if got := usersRole(t, e, c.apiKey, m.id); got != "admin" {
		t.Errorf("the last admin's role: got %q, want admin", got)
	}

	// Invalid roles are refused.
	usersWant(t, e.do(call{method: "PATCH", path: usersPath(c.adminID), token: m.access, body: map[string]any{"role": "owner"}}), http.StatusBadRequest, "validation_failed", "role")
	usersWant(t, e.do(call{method: "PATCH", path: usersPath(c.adminID), token: m.access, body: map[string]any{"firstName": ""}}), http.StatusBadRequest, "validation_failed", "firstName")
}

func TestRolesPendingAdminDoesNotCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	// An invited admin who has not set a password cannot sign in, so cannot
	// stand in for the last admin.
	p := usersInvite(t, e, c.access, "Pat", "pat@acme.test", "admin")
	if p["role"] != "admin" || p["emailVerified"] != false {
		t.Fatalf("invited admin: got role %v emailVerified %v, want admin false", p["role"], p["emailVerified"])
	}
	usersWant(t, e.do(call{method: "PATCH", path: usersPath(c.adminID), token: c.access, body: map[string]any{"role": "member"}}), http.StatusConflict, "conflict", "")
	usersWant(t, e.do(call{method: "DELETE", path: usersPath(c.adminID), token: c.apiKey}), http.StatusConflict, "conflict", "")

	// Once Pat has set a password, there are two admins.
	usersAccept(t, e, "pat@acme.test")
	r := e.do(call{method: "PATCH", path: usersPath(c.adminID), token: c.access, body: map[string]any{"role": "member"}})
	e.want(r, http.StatusOK, "")
	if r.str("role") != "member" {
		t.Errorf("demote with a second admin: got role %q, want member", r.str("role"))
	}
}

func TestRolesDeleteUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	d := usersJoin(t, e, c.access, "Dee", "dee@acme.test", "member")
	e.want(e.do(call{method: "GET", path: "/users/me", token: d.access}), http.StatusOK, "")

	r := e.do(call{method: "DELETE", path: usersPath(d.id), token: c.access})
	e.want(r, http.StatusOK, "")
	if got := slices.Sorted(maps.Keys(r.Body)); !reflect.DeepEqual(got, []string{"message"}) || r.str("message") == "" {
		t.Errorf("DELETE /users/{id}: got %s, want {message}", r.Raw)
	}

	// Every credential of the deleted user stops working at once.
	usersWant(t, e.do(call{method: "GET", path: "/users/me", token: d.access}), http.StatusUnauthorized, "unauthorized", "")
	usersWant(t, e.do(call{method: "GET", path: "/users", token: d.access}), http.StatusUnauthorized, "unauthorized", "")
	usersWant(t, e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": d.refresh}}), http.StatusUnauthorized, "unauthorized", "")
	usersWant(t, e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": d.email, "password": usersPassword}}), http.StatusUnauthorized, "invalid_credentials", "")
	if got, want := usersIDs(usersList(t, e, c.access)), []float64{c.adminID}; !reflect.DeepEqual(got, want) {
		t.Errorf("GET /users after delete: got ids %v, want %v", got, want)
	}

	// The deleted user and ids that never existed are not found.
	for _, path := range []string{usersPath(d.id), "/users/999999", "/users/0", "/users/abc"} {
		t.Run(path, func(t *testing.T) {
			se := usersEnvFor(e, t)
			usersWant(t, se.do(call{method: "PATCH", path: path, token: c.access, body: map[string]any{"firstName": "X"}}), http.StatusNotFound, "not_found", "")
			usersWant(t, se.do(call{method: "DELETE", path: path, token: c.apiKey}), http.StatusNotFound, "not_found", "")
		})
	}

	// The address is free again.
	again := usersInvite(t, e, c.access, "Dee", "dee@acme.test", "member")
	if again["id"] == d.id {
		t.Errorf("re-invited user: got the deleted user's id %v, want a new one", d.id)
	}

	// A pending invitee deleted before accepting: the link is dead, not a fault.
	p := usersInvite(t, e, c.access, "Pia", "pia@acme.test", "member")
	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "pia@acme.test", 10*time.Second).Text, "/reset-password")
	e.want(e.do(call{method: "DELETE", path: usersPath(p["id"].(float64)), token: c.access}), http.StatusOK, "")
	usersWant(t, e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": usersPassword}}), http.StatusBadRequest, "invalid_token", "")

	// With two admins, either can be deleted; the API key can do it.
	x := usersJoin(t, e, c.access, "Xan", "xan@acme.test", "admin")
	e.want(e.do(call{method: "DELETE", path: usersPath(x.id), token: c.apiKey}), http.StatusOK, "")
	usersWant(t, e.do(call{method: "GET", path: "/account/api-key", token: x.access}), http.StatusUnauthorized, "unauthorized", "")
}

func TestAPIKeyGetAndRotate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	created := e.clock.Now().UTC().Format(usersTimeLayout)

	byAccess := e.do(call{method: "GET", path: "/account/api-key", token: c.access})
	e.want(byAccess, http.StatusOK, "")
	byKey := e.do(call{method: "GET", path: "/account/api-key", token: c.apiKey})
	e.want(byKey, http.StatusOK, "")
	for name, r := range map[string]resp{"access token": byAccess, "API key": byKey} {
		if got := slices.Sorted(maps.Keys(r.Body)); !reflect.DeepEqual(got, []string{"apiKey", "createdAt"}) {
			t.Errorf("GET /account/api-key with the %s: got keys %v, want [apiKey createdAt]", name, got)
		}
		if r.str("apiKey") != c.apiKey {
			t.Errorf("GET /account/api-key with the %s: got key %q, want %q", name, r.str("apiKey"), c.apiKey)
		}
		if r.str("createdAt") != created {
			t.Errorf("GET /account/api-key with the %s: got createdAt %q, want %q", name, r.str("createdAt"), created)
		}
	}
	if !usersAPIKey.MatchString(c.apiKey) || len(c.apiKey) != 43 {
		t.Errorf("API key: got %q (%d chars), want sk_ and 40 base62 characters", c.apiKey, len(c.apiKey))
	}

	e.clock.Advance(time.Minute + 250*time.Millisecond)
	rotated := e.do(call{method: "POST", path: "/account/api-key/rotate", token: c.access})
	e.want(rotated, http.StatusOK, "")
	key := rotated.str("apiKey")
	if !usersAPIKey.MatchString(key) || key == c.apiKey {
		t.Fatalf("rotate: got key %q, want a new sk_ key of 43 characters", key)
	}
	if want := e.clock.Now().UTC().Format(usersTimeLayout); rotated.str("createdAt") != want {
		t.Errorf("rotate: got createdAt %q, want %q", rotated.str("createdAt"), want)
	}

	// The old key is dead at once; the new one works and is the one shown.
	usersWant(t, e.do(call{method: "GET", path: "/account/api-key", token: c.apiKey}), http.StatusUnauthorized, "unauthorized", "")
	usersWant(t, e.do(call{method: "GET", path: "/company", token: c.apiKey}), http.StatusUnauthorized, "unauthorized", "")
	for name, tok := range map[string]string{"access token": c.access, "new key": key} {
		r := e.do(call{method: "GET", path: "/account/api-key", token: tok})
		e.want(r, http.StatusOK, "")
		if r.str("apiKey") != key || r.str("createdAt") != rotated.str("createdAt") {
			t.Errorf("GET /account/api-key with the %s after rotation: got %s, want %s", name, r.Raw, rotated.Raw)
		}
	}

	// The key can rotate itself; then it too is dead.
	again := e.do(call{method: "POST", path: "/account/api-key/rotate", token: key})
	e.want(again, http.StatusOK, "")
	if again.str("apiKey") == key || again.str("apiKey") == c.apiKey {
		t.Fatalf("second rotation: got key %q, want a fresh one", again.str("apiKey"))
	}
	usersWant(t, e.do(call{method: "GET", path: "/company", token: key}), http.StatusUnauthorized, "unauthorized", "")
	e.want(e.do(call{method: "GET", path: "/company", token: again.str("apiKey")}), http.StatusOK, "")
}

func TestCompanyGetAndPatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	m := usersJoin(t, e, c.access, "Mia", "mia@acme.test", "member")

	want := map[string]any{"id": c.id, "name": "Acme", "phone": "+15550100000", "address": "", "city": "", "state": "",
		"country": "US", "createdAt": "2026-11-22T10:00:00.000Z"}
	for name, tok := range map[string]string{"admin": c.access, "member": m.access, "API key": c.apiKey} {
		r := e.do(call{method: "GET", path: "/company", token: tok})
		e.want(r, http.StatusOK, "")
		usersCheckShape(t, "GET /company as "+name, r.Body, usersCompKeys, want)
	}

	r := e.do(call{method: "PATCH", path: "/company", token: c.access, body: map[string]any{"name": "Acme GmbH", "city": "Berlin", "country": "de", "address": "Hauptstr. 1"}})
	e.want(r, http.StatusOK, "")
	want["name"], want["city"], want["country"], want["address"] = "Acme GmbH", "Berlin", "DE", "Hauptstr. 1"
	usersCheckShape(t, "PATCH /company", r.Body, usersCompKeys, want)

	// "" clears an optional field and leaves the rest; the API key may patch too.
	r = e.do(call{method: "PATCH", path: "/company", token: c.apiKey, body: map[string]any{"city": ""}})
	e.want(r, http.StatusOK, "")
	want["city"] = ""
	usersCheckShape(t, "PATCH /company city \"\"", r.Body, usersCompKeys, want)

	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"empty name", map[string]any{"name": ""}, "name"},
		{"blank name", map[string]any{"name": "   "}, "name"},
		{"short phone", map[string]any{"phone": "123"}, "phone"},
		{"empty phone", map[string]any{"phone": ""}, "phone"},
		{"phone without +", map[string]any{"phone": "4930123456"}, "phone"},
		{"numeric country", map[string]any{"country": "1"}, "country"},
		{"long country", map[string]any{"country": "GERM"}, "country"},
		{"valid city, bad country", map[string]any{"city": "Hamburg", "country": "1"}, "country"},
		{"made-up country", map[string]any{"country": "ZZ"}, "country"},
		{"made-up three-letter country", map[string]any{"country": "zzz"}, "country"},
		{"withdrawn country", map[string]any{"country": "YU"}, "country"},
		{"private-use country", map[string]any{"country": "XA"}, "country"},
		{"wrong type", map[string]any{"name": true}, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := usersEnvFor(e, t)
			usersWant(t, se.do(call{method: "PATCH", path: "/company", token: c.access, body: tc.body}), http.StatusBadRequest, "validation_failed", tc.field)
		})
	}
	usersWant(t, e.do(call{method: "PATCH", path: "/company", token: m.access, body: map[string]any{"name": "Mia's"}}), http.StatusForbidden, "forbidden", "")

	// Neither the refused patches nor the member changed anything.
	r = e.do(call{method: "GET", path: "/company", token: m.access})
	e.want(r, http.StatusOK, "")
	usersCheckShape(t, "GET /company after refused patches", r.Body, usersCompKeys, want)
}

// usersRaw makes a request without the test helpers, for use off the test's goroutine.
func usersRaw(method, url, token string, body string) (int, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := testhttp.Client.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

func TestRolesConcurrentChangesKeepAnAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	for round, op := range []struct{ method, body string }{{"PATCH", `{"role":"member"}`}, {"DELETE", ""}} {
		// Two admins, and each is demoted (or deleted) at the same time:
		// exactly one change may win.
		m := usersJoin(t, e, c.apiKey, "Mia", fmt.Sprintf("mia%d@acme.test", round), "admin")
		admins := []float64{c.adminID, m.id}
		if op.method == "DELETE" {
			// Make the owner a member first so the two admins are deletable peers.
			admins = []float64{m.id, usersJoin(t, e, c.apiKey, "Max", "max@acme.test", "admin").id}
			e.want(e.do(call{method: "PATCH", path: usersPath(c.adminID), token: c.apiKey, body: map[string]any{"role": "member"}}), http.StatusOK, "")
		}
		statuses := make([]int, len(admins))
		errs := make([]error, len(admins))
		done := make(chan struct{})
		for i, id := range admins {
			go func() {
				defer func() { done <- struct{}{} }()
				statuses[i], errs[i] = usersRaw(op.method, e.url+usersPath(id), c.apiKey, op.body)
			}()
		}
		for range admins {
			<-done
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		sort.Ints(statuses)
		if want := []int{http.StatusOK, http.StatusConflict}; !reflect.DeepEqual(statuses, want) {
			t.Errorf("concurrent %s of both admins: got statuses %v, want %v", op.method, statuses, want)
		}
		n := 0
		for _, u := range usersList(t, e, c.apiKey) {
			if u["role"] == "admin" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("after concurrent %s: got %d admins, want 1", op.method, n)
		}
		if op.method == "PATCH" {
			// Restore: the owner admin again, the other one a member.
			for _, id := range admins {
				e.want(e.do(call{method: "PATCH", path: usersPath(id), token: c.apiKey, body: map[string]any{"role": "admin"}}), http.StatusOK, "")
			}
			e.want(e.do(call{method: "PATCH", path: usersPath(m.id), token: c.apiKey, body: map[string]any{"role": "member"}}), http.StatusOK, "")
		}
	}
}

// A company's country is an ISO 3166 code of a country the numbering data
// knows, two letters or three, in any case; a code stored before codes were
// checked (ZZ) still reads, and sent back, as the console's form sends every
// field, does not refuse the save of another field; changed, it is checked.
func TestCompanyCountryCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	for in, want := range map[string]string{"usa": "USA", " gbr ": "GBR", "gb": "GB", "UK": "UK", "xk": "XK", "": ""} {
		r := e.do(call{method: "PATCH", path: "/company", token: c.access, body: map[string]any{"country": in}})
		e.want(r, http.StatusOK, "")
		if got := r.str("country"); got != want {
			t.Fatalf("PATCH country %q: stored %q, want %q", in, got, want)
		}
	}
	if _, err := e.store.UpdateCompany(uint64(c.id), func(co *store.Company) error { co.Country = "ZZ"; return nil }); err != nil {
		t.Fatal(err)
	}
	r := e.do(call{method: "GET", path: "/company", token: c.access})
	e.want(r, http.StatusOK, "")
	if r.str("country") != "ZZ" {
		t.Fatalf("GET /company with a stored ZZ: %s", r.Raw)
	}
	r = e.do(call{method: "PATCH", path: "/company", token: c.access, body: map[string]any{"country": "zz", "city": "Leeds"}})
	e.want(r, http.StatusOK, "")
	if r.str("country") != "ZZ" || r.str("city") != "Leeds" {
		t.Fatalf("PATCH with the stored country sent back: %s, want ZZ kept and the city saved", r.Raw)
	}
	usersWant(t, e.do(call{method: "PATCH", path: "/company", token: c.access, body: map[string]any{"country": "QQ"}}), http.StatusBadRequest, "validation_failed", "country")
	r = e.do(call{method: "PATCH", path: "/company", token: c.access, body: map[string]any{"country": "DE"}})
	e.want(r, http.StatusOK, "")
	if r.str("country") != "DE" {
		t.Fatalf("PATCH from a stored ZZ to DE: %s", r.Raw)
	}
}
