package web_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"
)

// signupForm is a sign-up the console would take, every field well formed.
func signupForm(csrf, email string) url.Values {
	return url.Values{"csrf": {csrf}, "company.name": {"Stranger Co"}, "company.phone": {"+15550100123"},
		"owner.firstName": {"Sam"}, "owner.lastName": {"Stranger"}, "owner.email": {email},
		"owner.password": {"Correct1horse"}, "password2": {"Correct1horse"}}
}

// signupJSON is POST /auth/signup's body, every field well formed.
const signupJSON = `{"company":{"name":"Stranger Co","phone":"+15550100123"},"owner":{"firstName":"Sam","lastName":"Stranger","email":"%s","password":"Correct1horse"}}`

// apiSignup sends POST /auth/signup for email and answers its status and error body.
func apiSignup(t *testing.T, e *env, email string) (int, map[string]string) {
	t.Helper()
	res, err := testhttp.Client.Post(e.url+"/auth/signup", "application/json", strings.NewReader(strings.Replace(signupJSON, "%s", email, 1)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body
}

// A server whose operator closed sign-up (serve --signup closed) answers
// every sign-up, the API's and the console's, 403 signup_closed and stores
// nothing: no company, no user, no verification mail. The sign-in page has
// no link to the sign-up page, which says sign-up is closed and has no
// form. The operator's companies (admin create-company) and their
// invitations work as before.
func TestSignupClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.signupClosed = true })
	b := e.browser()

	signin := b.get("/console/signin")
	if signin.status != http.StatusOK || strings.Contains(signin.body, `href="/console/signup"`) {
		t.Errorf("GET /console/signin: got %d, want 200 without a link to the sign-up page:\n%s", signin.status, signin.body)
	}
	page := b.get("/console/signup")
	if page.status != http.StatusOK || !strings.Contains(page.body, "Sign-up is closed") || strings.Contains(page.body, "<form") || strings.Contains(page.body, `name="owner.password"`) {
		t.Errorf("GET /console/signup: got %d, want 200 saying sign-up is closed, with no form:\n%s", page.status, page.body)
	}

	before, err := e.store.CompanyIDs()
	if err != nil {
		t.Fatal(err)
	}
	// The console's form, sent as a browser would with the page's token.
	p := b.post("/console/signup", signupForm(tokenOf(t, signin), "sam@stranger.test"))
	var refused struct{ Error, Message string }
	if err := json.Unmarshal([]byte(p.body), &refused); err != nil || p.status != http.StatusForbidden || refused.Error != "signup_closed" || !strings.Contains(refused.Message, "closed") {
		t.Errorf("POST /console/signup: got %d %s, want 403 signup_closed", p.status, p.body)
	}
	// The API, well-formed and not: the same 403, the body never read.
	for _, email := range []string{"sam@stranger.test", "not an address"} {
		code, body := apiSignup(t, e, email)
		if code != http.StatusForbidden || body["error"] != "signup_closed" || body["message"] == "" || body["field"] != "" {
			t.Errorf("POST /auth/signup (%s): got %d %v, want 403 signup_closed with a message and no field", email, code, body)
		}
	}
	after, err := e.store.CompanyIDs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("companies before %v, after the refused sign-ups %v: one was stored", before, after)
	}
	if _, err := e.store.UserByEmail("sam@stranger.test"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused sign-up's user: %v, want not found", err)
	}
	mails, err := e.store.Mails(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mails {
		if strings.Contains(m.To, "stranger.test") {
			t.Errorf("a refused sign-up queued a mail to %s", m.To)
		}
	}

	// The operator's company, and its invitations, work as before.
	e.company("Acme", "ada@acme.test", "Correct1horse")
	admin := e.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	member := e.member(admin)
	if got := member.get("/console/devices"); got.status != http.StatusOK {
		t.Errorf("the invited member's console: got %d, want 200", got.status)
	}
}

// Open (the default), the sign-in page links to the sign-up page, which
// shows its form, and a sign-up is taken.
func TestSignupOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	if p := b.get("/console/signin"); !strings.Contains(p.body, `href="/console/signup"`) {
		t.Errorf("GET /console/signin: no link to the sign-up page:\n%s", p.body)
	}
	page := b.get("/console/signup")
	if page.status != http.StatusOK || strings.Contains(page.body, "Sign-up is closed") || !strings.Contains(page.body, `action="/console/signup"`) {
		t.Errorf("GET /console/signup: got %d, want its form:\n%s", page.status, page.body)
	}
	if p := b.post("/console/signup", signupForm(tokenOf(t, page), "sam@stranger.test")); p.status != http.StatusOK {
		t.Errorf("POST /console/signup: got %d %s, want 200", p.status, p.body)
	}
	if code, body := apiSignup(t, e, "kim@stranger.test"); code != http.StatusCreated {
		t.Errorf("POST /auth/signup: got %d %v, want 201", code, body)
	}
}
