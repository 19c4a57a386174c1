package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/pacing"
)

// roomy lifts the rate limits for tests that are about something else.
func roomy(c *httpapi.Config) {
	c.GeneralRate = pacing.Rate{Limit: 10000, Window: time.Minute}
	c.AuthRate = pacing.Rate{Limit: 10000, Window: time.Minute}
}

func signupBody(email, password string) map[string]any {
	return map[string]any{
		"company": map[string]any{"name": "Acme", "phone": "+15550100000"},
		"owner":   map[string]any{"firstName": "Ana", "lastName": "Admin", "email": email, "password": password},
	}
}

func TestSignupValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	cases := []struct {
		name  string
		body  any
		code  string
		field string
	}{
		{"short password", signupBody("a@example.com", "Ab1"), "validation_failed", "owner.password"},
		{"no upper-case", signupBody("a@example.com", "password123"), "validation_failed", "owner.password"},
		{"no digit", signupBody("a@example.com", "Passwordxx"), "validation_failed", "owner.password"},
		{"bad e-mail", signupBody("not-an-email", goodPassword), "validation_failed", "owner.email"},
		{"missing company name", map[string]any{"company": map[string]any{"phone": "+15550100000"}, "owner": signupBody("a@example.com", goodPassword)["owner"]}, "validation_failed", "company.name"},
		{"phone without +", map[string]any{"company": map[string]any{"name": "A", "phone": "5550100000"}, "owner": signupBody("a@example.com", goodPassword)["owner"]}, "validation_failed", "company.phone"},
		{"bad country", map[string]any{"company": map[string]any{"name": "A", "phone": "+15550100000", "country": "U5"}, "owner": signupBody("a@example.com", goodPassword)["owner"]}, "validation_failed", "company.country"},
		{"made-up country", map[string]any{"company": map[string]any{"name": "A", "phone": "+15550100000", "country": "ZZ"}, "owner": signupBody("a@example.com", goodPassword)["owner"]}, "validation_failed", "company.country"},
		{"wrong type", map[string]any{"company": map[string]any{"name": "A", "phone": "+15550100000"}, "owner": map[string]any{"firstName": "A", "lastName": "B", "email": "a@example.com", "password": 12345678}}, "validation_failed", "owner.password"},
		{"malformed JSON", `{"company": {`, "invalid_json", ""},
		{"empty body", "", "invalid_json", ""},
		{"two objects", `{} {}`, "invalid_json", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(call{method: "POST", path: "/auth/signup", body: c.body})
			if r.Status != http.StatusBadRequest || r.str("error") != c.code || r.str("field") != c.field {
				t.Fatalf("got %d %s, want 400 %s field %q", r.Status, r.Raw, c.code, c.field)
			}
		})
	}
	if n := len(e.inbox.Messages()); n != 0 {
		t.Errorf("got %d mails after refused signups, want 0", n)
	}
}

func TestSignupVerifyLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	email := "owner@acme.test"
	r := e.do(call{method: "POST", path: "/auth/signup", body: signupBody(email, goodPassword)})
	e.want(r, http.StatusCreated, "")
	if r.str("message") == "" || r.Body["companyId"] == nil || r.Body["userId"] == nil {
		t.Fatalf("signup answer lacks message, companyId or userId: %s", r.Raw)
	}
	// The same address again is a conflict.
	e.want(e.do(call{method: "POST", path: "/auth/signup", body: signupBody("OWNER@acme.test", goodPassword)}), http.StatusConflict, "conflict")

	// A wrong password says nothing about verification; the right one does.
	e.want(e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": "Wrong-pass-1"}}), http.StatusUnauthorized, "invalid_credentials")
	e.want(e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": goodPassword}}), http.StatusForbidden, "email_not_verified")

	msg := e.inbox.WaitFor(t, email, 10*time.Second)
	if !strings.Contains(msg.HTML, "/verify-email?token=") {
		t.Errorf("the HTML part lacks the verification link: %s", msg.HTML)
	}
	link := e.url + "/verify-email?token="
	if !strings.Contains(msg.Text, link) {
		t.Fatalf("the text part lacks a link starting %s: %s", link, msg.Text)
	}
	tok := mailtest.LinkToken(msg.Text, "/verify-email")
	page := e.do(call{method: "GET", path: "/verify-email?token=" + tok})
	if page.Status != http.StatusOK || !strings.Contains(string(page.Raw), `action="/verify-email"`) || !strings.Contains(string(page.Raw), tok) {
		t.Fatalf("the link's page: got %d, want the verification page", page.Status)
	}
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": tok}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": tok}}), http.StatusBadRequest, "invalid_token")
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": "nope"}}), http.StatusBadRequest, "invalid_token")
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{}}), http.StatusBadRequest, "validation_failed")

	r = e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": goodPassword}})
	e.want(r, http.StatusOK, "")
	if r.str("tokenType") != "Bearer" || r.Body["expiresIn"] != float64(900) || r.str("accessToken") == "" || r.str("refreshToken") == "" {
		t.Fatalf("login answer: %s", r.Raw)
	}
	user := r.Body["user"].(map[string]any)
	for k, want := range map[string]any{"email": email, "role": "admin", "firstName": "Ana", "lastName": "Admin", "emailVerified": true} {
		if user[k] != want {
			t.Errorf("login user.%s: got %v, want %v", k, user[k], want)
		}
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", user["createdAt"].(string)); err != nil {
		t.Errorf("createdAt %q is not RFC 3339 UTC with milliseconds", user["createdAt"])
	}

	// Unknown address and wrong password answer alike.
	a := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": "nobody@acme.test", "password": goodPassword}})
	b := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": "Wrong-pass-1"}})
	if a.Status != b.Status || a.str("error") != b.str("error") || a.str("message") != b.str("message") {
		t.Errorf("unknown e-mail answered %d %s, wrong password %d %s: they must not differ", a.Status, a.Raw, b.Status, b.Raw)
	}
	// A password shorter than the spec's 8 is refused before any account is
	// looked at: the same 400 for a known address and an unknown one.
	short := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": "short"}})
	e.want(short, http.StatusBadRequest, "validation_failed")
	if short.str("field") != "password" {
		t.Errorf("a short password's field: got %q, want password", short.str("field"))
	}
	unknown := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": "nobody@acme.test", "password": "short"}})
	if unknown.Status != short.Status || string(unknown.Raw) != string(short.Raw) {
		t.Errorf("a short password answered %d %s for an unknown address, %d %s for a known one: they must not differ", unknown.Status, unknown.Raw, short.Status, short.Raw)
	}
}

func TestRefreshRotationAndReuse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")

	r := e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": c.refresh}})
	e.want(r, http.StatusOK, "")
	next := r.str("refreshToken")
	if next == "" || next == c.refresh || r.str("accessToken") == "" {
		t.Fatalf("refresh must hand out a new pair: %s", r.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/users/me", token: r.str("accessToken")}), http.StatusOK, "")

	// The spent token presented again: refused, and its whole family with it.
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": c.refresh}}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": next}}), http.StatusUnauthorized, "unauthorized")

	// Another login is another family and still works.
	_, other := e.login(c.email, c.password)
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": other}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": "rt_unknown"}}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{}}), http.StatusBadRequest, "validation_failed")

	// Refresh tokens expire after 30 days.
	_, old := e.login(c.email, c.password)
	e.clock.Advance(30*24*time.Hour + time.Second)
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": old}}), http.StatusUnauthorized, "unauthorized")
}

func TestAccessTokenChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	e.want(e.do(call{method: "GET", path: "/users/me", token: c.access}), http.StatusOK, "")

	// alg none, a foreign key and a tampered payload are all refused.
	claims := jwt.MapClaims{"sub": "1", "cid": 1, "role": "admin", "iat": e.clock.Now().Unix(), "exp": e.clock.Now().Add(time.Hour).Unix()}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	foreign, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte("not the server's key"))
	parts := strings.Split(c.access, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	for name, tok := range map[string]string{"none": none, "foreign key": foreign, "tampered": tampered, "garbage": "abc", "unknown api key": "sk_" + strings.Repeat("a", 40)} {
		r := e.do(call{method: "GET", path: "/users/me", token: tok})
		if r.Status != http.StatusUnauthorized || r.str("error") != "unauthorized" {
			t.Errorf("%s token: got %d %s, want 401 unauthorized", name, r.Status, r.Raw)
		}
	}
	e.want(e.do(call{method: "GET", path: "/users/me", header: map[string]string{"Authorization": "Basic abc"}}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "GET", path: "/users/me"}), http.StatusUnauthorized, "unauthorized")

	// Access tokens live 15 minutes.
	e.clock.Advance(15*time.Minute + time.Second)
	e.want(e.do(call{method: "GET", path: "/users/me", token: c.access}), http.StatusUnauthorized, "unauthorized")
}

func TestForgotAndResetPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	before := len(e.inbox.Messages())

	// Unknown addresses get the same answer and no mail.
	r := e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": "nobody@acme.test"}})
	e.want(r, http.StatusOK, "")
	known := e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": c.email}})
	e.want(known, http.StatusOK, "")
	if known.str("message") != r.str("message") {
		t.Errorf("forgot-password answers differ for known and unknown addresses")
	}
	msg := waitForNth(t, e, c.email, 2)
	if got := len(e.inbox.Messages()); got != before+1 {
		t.Errorf("got %d new mails, want 1 (none for the unknown address)", got-before)
	}
	tok := mailtest.LinkToken(msg.Text, "/reset-password")
	if tok == "" {
		t.Fatalf("no reset link in %q", msg.Text)
	}
	page := e.do(call{method: "GET", path: "/reset-password?token=" + tok})
	if page.Status != http.StatusOK || !strings.Contains(string(page.Raw), `action="/reset-password"`) || !strings.Contains(string(page.Raw), tok) {
		t.Fatalf("the link's page: got %d", page.Status)
	}

	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "short"}}), http.StatusBadRequest, "validation_failed")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "new password 2"}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "new password 3"}}), http.StatusBadRequest, "invalid_token")

	// The old password and every earlier session are gone.
	e.want(e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": c.email, "password": c.password}}), http.StatusUnauthorized, "invalid_credentials")
	e.want(e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": c.refresh}}), http.StatusUnauthorized, "unauthorized")
	e.login(c.email, "new password 2")

	// A reset link lasts an hour.
	e.want(e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": c.email}}), http.StatusOK, "")
	late := mailtest.LinkToken(waitForNth(t, e, c.email, 3).Text, "/reset-password")
	e.clock.Advance(time.Hour + time.Second)
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": late, "password": "new password 4"}}), http.StatusBadRequest, "invalid_token")
}

func TestVerificationLinkExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	e.want(e.do(call{method: "POST", path: "/auth/signup", body: signupBody("late@acme.test", goodPassword)}), http.StatusCreated, "")
	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "late@acme.test", 10*time.Second).Text, "/verify-email")
	e.clock.Advance(24*time.Hour + time.Second)
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": tok}}), http.StatusBadRequest, "invalid_token")
}

// waitForNth waits until n mails reached the address and returns the newest.
func waitForNth(t *testing.T, e *env, to string, n int) mailtest.Received {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var got []mailtest.Received
		for _, m := range e.inbox.Messages() {
			for _, rcpt := range m.To {
				if strings.EqualFold(rcpt, to) {
					got = append(got, m)
				}
			}
		}
		if len(got) >= n {
			return got[n-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d mails reached %s within 10s", n, to)
	return mailtest.Received{}
}
