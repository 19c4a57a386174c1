package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// signedInPages are every page of the signed-in console.
var signedInPages = []string{"/console/", "/console/devices", "/console/messages", "/console/pools", "/console/numbers", "/console/opt-outs", "/console/webhooks", "/console/team",
	"/console/settings", "/console/billing"}

func TestPagesNeedASession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	for _, p := range signedInPages {
		got := b.get(p)
		if got.status != http.StatusSeeOther || !strings.HasPrefix(got.location, "/console/signin?next=") {
			t.Errorf("GET %s without a session: got %d to %q, want 303 to the sign-in page", p, got.status, got.location)
		}
	}
	if got := b.get("/"); got.status != http.StatusFound || got.location != "/console/" {
		t.Errorf("GET /: got %d to %q, want 302 to /console/", got.status, got.location)
	}
	for _, p := range []string{"/console/signin", "/console/signup", "/console/forgot-password", "/verify-email?token=x", "/reset-password?token=x"} {
		got := b.get(p)
		if got.status != http.StatusOK || !strings.Contains(got.body, `name="csrf"`) {
			t.Errorf("GET %s: got %d, want 200 with a CSRF field", p, got.status)
		}
		if got.header.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(got.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("GET %s: security headers missing: %v", p, got.header)
		}
	}
}

func TestEveryPageRendersForAdminAndMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	admin := e.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	// Invite a member and let them set a password through the e-mailed link.
	if p := admin.post("/console/team/invite", url.Values{"email": {"mo@acme.test"}, "firstName": {"Mo"}, "lastName": {"Member"}, "role": {"member"}}); p.status != http.StatusOK {
		t.Fatalf("invite: %d %s", p.status, p.body)
	}
	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "mo@acme.test", 10*time.Second).Text, "/reset-password")
	member := e.browser()
	anon := tokenOf(t, member.get("/reset-password?token="+tok))
	if p := member.post("/reset-password", url.Values{"csrf": {anon}, "token": {tok}, "password": {"Member1pass"}, "password2": {"Member1pass"}}); p.status != http.StatusOK {
		t.Fatalf("reset: %d %s", p.status, p.body)
	}
	member.signIn("mo@acme.test", "Member1pass")

	for _, p := range signedInPages {
		for who, b := range map[string]*browser{"admin": admin, "member": member} {
			got := b.get(p)
			if got.status != http.StatusOK {
				t.Errorf("GET %s as %s: got %d, want 200", p, who, got.status)
			}
			for _, link := range []string{`href="/console/devices"`, `href="/console/messages"`, `href="/console/webhooks"`} {
				if !strings.Contains(got.body, link) {
					t.Errorf("GET %s as %s: navigation lacks %s", p, who, link)
				}
			}
		}
	}
	// Admin actions are on the admin's pages and absent from the member's.
	adminOnly := map[string][]string{
		"/console/team":     {`action="/console/team/invite"`, `/remove"`},
		"/console/settings": {`action="/console/settings/api-key/rotate"`, `id="api-key"`},
		"/console/webhooks": {`action="/console/webhooks/secret/rotate"`, `Save webhooks`},
		"/console/billing":  {`action="/console/billing/subscribe"`},
	}
	for p, marks := range adminOnly {
		a, m := admin.get(p), member.get(p)
		for _, mark := range marks {
			if !strings.Contains(a.body, mark) {
				t.Errorf("GET %s as admin: %s missing", p, mark)
			}
			if strings.Contains(m.body, mark) {
				t.Errorf("GET %s as member: %s shown", p, mark)
			}
		}
	}
	key, _, _ := e.accounts.APIKey(t.Context(), account.Principal{CompanyID: 1, Role: "admin"})
	if strings.Contains(member.get("/console/settings").body, key) {
		t.Error("a member's settings page holds the API key")
	}
	// A forged admin action from the member answers 403 and changes nothing.
	for _, path := range []string{"/console/team/invite", "/console/settings/api-key/rotate", "/console/webhooks/secret/rotate",
		"/console/webhooks", "/console/settings/company", "/console/billing/subscribe", "/console/team/1/role", "/console/team/1/remove"} {
		got := member.post(path, url.Values{"email": {"x@acme.test"}, "role": {"member"}, "rows": {"0"}, "plan_id": {"pro"}, "name": {"Hijacked"}})
		if got.status != http.StatusForbidden || !strings.Contains(got.body, `"error":"forbidden"`) {
			t.Errorf("POST %s as member: got %d %s, want 403 forbidden", path, got.status, got.body)
		}
	}
	if after, _, _ := e.accounts.APIKey(t.Context(), account.Principal{CompanyID: 1, Role: "admin"}); after != key {
		t.Error("the member's forged rotation changed the API key")
	}
	if strings.Contains(admin.get("/console/settings").body, "Hijacked") {
		t.Error("the member's forged company update went through")
	}
}

func TestEveryPostNeedsTheCSRFToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, path := range []string{"/console/pairing", "/console/devices/x", "/console/devices/x/delete", "/console/messages/send",
		"/console/webhooks", "/console/webhooks/secret/rotate", "/console/team/invite", "/console/team/1/role", "/console/team/1/remove",
		"/console/settings/company", "/console/settings/api-key/rotate", "/console/billing/subscribe", "/console/billing/portal", "/console/signout",
		"/console/messages/cancel", "/console/opt-outs", "/console/opt-outs/remove", "/console/opt-outs/keywords",
		"/console/numbers/whatsapp/x/status", "/console/numbers/whatsapp/x/pacing", "/console/numbers/whatsapp/x/send",
		"/console/pools", "/console/pools/caps", "/console/pools/1", "/console/pools/1/delete", "/console/pools/1/members", "/console/pools/1/members/1/remove"} {
		for name, tok := range map[string]string{"none": "", "wrong": "not-the-token"} {
			got := b.post(path, url.Values{"csrf": {tok}})
			if got.status != http.StatusForbidden || !strings.Contains(got.body, "security token") {
				t.Errorf("POST %s with %s token: got %d %s, want 403", path, name, got.status, got.body)
			}
		}
	}
	// A plain form post (a forged one has no reason to ask for JSON) is
	// refused with 403 too, on a page that says why, not redirected.
	forged, _ := http.NewRequest(http.MethodPost, e.url+"/console/settings/api-key/rotate", strings.NewReader("csrf=forged"))
	forged.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if got := read(t, must(b.c.Do(forged))); got.status != http.StatusForbidden || !strings.Contains(got.body, "security token") {
		t.Errorf("plain form post with a forged token: got %d %.200s, want 403", got.status, got.body)
	}
	// The forms before sign-in check the double-submit token.
	anon := e.browser()
	for _, path := range []string{"/console/signin", "/console/signup", "/console/forgot-password", "/verify-email", "/reset-password"} {
		if got := anon.post(path, url.Values{"email": {"ada@acme.test"}, "password": {"Correct1horse"}}); got.status != http.StatusForbidden {
			t.Errorf("POST %s without its token: got %d, want 403", path, got.status)
		}
	}
	if after, _, _ := e.accounts.APIKey(t.Context(), account.Principal{CompanyID: 1, Role: "admin"}); after != key {
		t.Error("a refused rotation changed the API key")
	}
	// The token rides in the header too, as the JavaScript sends it.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/pairing", nil)
	req.Header.Set("X-CSRF-Token", b.csrf)
	req.Header.Set("Accept", "application/json")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := read(t, res); p.status != http.StatusOK || !strings.Contains(p.body, "pairing=") {
		t.Errorf("pair with the header token: got %d %s", p.status, p.body)
	}
}

func TestAnotherCompanysObjectsAreNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	e.pairPhone(e.pairingCode(keyA), "fp-acme", false)
	bo := e.browser()
	bo.signIn("bo@bolt.test", "Correct1horse")
	for _, c := range []struct {
		method, path string
	}{
		{"GET", "/console/messages?device=fp-acme"},
		{"GET", "/console/messages/thread?device=fp-acme&phone=%2B15550100000"},
		{"POST", "/console/devices/fp-acme"},
		{"POST", "/console/devices/fp-acme/delete"},
		{"POST", "/console/team/1/role"},
		{"POST", "/console/team/1/remove"},
	} {
		var got page
		if c.method == "GET" {
			got = bo.get(c.path)
		} else {
			got = bo.post(c.path, url.Values{"device_name": {"mine now"}, "role": {"member"}})
		}
		if got.status != http.StatusNotFound {
			t.Errorf("%s %s across companies: got %d, want 404", c.method, c.path, got.status)
		}
	}
	got := bo.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-acme"}, "phone": {"+15550100000"}, "message": {"hi"}})
	if got.status != http.StatusNotFound {
		t.Errorf("send through another company's device: got %d, want 404", got.status)
	}
	if p := bo.get("/console/devices"); strings.Contains(p.body, "fp-acme") {
		t.Error("another company's device is listed")
	}
	if p := bo.get("/console/team"); strings.Contains(p.body, "ada@acme.test") {
		t.Error("another company's user is listed")
	}
}

func TestSessionCookieAndLifetimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	anon := tokenOf(t, b.get("/console/signin"))
	// A wrong password shows the API's message for the field-less login error.
	if p := b.post("/console/signin", url.Values{"csrf": {anon}, "email": {"ada@acme.test"}, "password": {"wrong pass"}}); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "invalid_credentials") {
		t.Errorf("wrong password: got %d %s", p.status, p.body)
	}
	if p := b.post("/console/signin", url.Values{"csrf": {anon}, "email": {"not-an-address"}, "password": {"x"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"email"`) {
		t.Errorf("bad e-mail: got %d %s, want 400 naming the field", p.status, p.body)
	}
	p := b.post("/console/signin", url.Values{"csrf": {anon}, "email": {"ada@acme.test"}, "password": {"Correct1horse"}})
	var sc *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "simrelay_session" {
			sc = c
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteLaxMode || sc.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure on http", sc)
	}
	if rec, err := e.store.ConsoleSession([]byte(sc.Value)); err == nil {
		t.Errorf("the store keys the session by its id in the clear: %+v", rec)
	}
	if got := b.get("/console/"); got.status != http.StatusOK {
		t.Fatalf("overview after sign-in: %d", got.status)
	}
	// Idle past the limit: signed out.
	e.clock.Advance(account.DefaultConsoleIdle + time.Minute)
	if got := b.get("/console/"); got.status != http.StatusSeeOther {
		t.Errorf("after the idle limit: got %d, want 303 to sign in", got.status)
	}
	// Busy but past the absolute lifetime: signed out too.
	b.signIn("ada@acme.test", "Correct1horse")
	for spent := time.Duration(0); spent < account.DefaultConsoleLifetime; spent += account.DefaultConsoleIdle / 2 {
		e.clock.Advance(account.DefaultConsoleIdle / 2)
		b.get("/console/")
	}
	if got := b.get("/console/"); got.status != http.StatusSeeOther {
		t.Errorf("after the absolute lifetime: got %d, want 303 to sign in", got.status)
	}
	// Sign-out ends the session on the server, not only the cookie.
	b.signIn("ada@acme.test", "Correct1horse")
	stolen := b.c.Jar.Cookies(mustURL(t, e.url))
	if p := b.post("/console/signout", nil); p.status != http.StatusOK {
		t.Fatalf("sign out: %d %s", p.status, p.body)
	}
	thief := e.browser()
	thief.c.Jar.SetCookies(mustURL(t, e.url), stolen)
	if got := thief.get("/console/"); got.status != http.StatusSeeOther {
		t.Errorf("a signed-out session's cookie: got %d, want 303", got.status)
	}
}

func TestPasswordResetEndsConsoleSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	other := e.browser()
	anon := tokenOf(t, other.get("/console/forgot-password"))
	if p := other.post("/console/forgot-password", url.Values{"csrf": {anon}, "email": {"ada@acme.test"}}); p.status != http.StatusOK {
		t.Fatalf("forgot: %d %s", p.status, p.body)
	}
	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "ada@acme.test", 10*time.Second).Text, "/reset-password")
	anon = tokenOf(t, other.get("/reset-password?token="+tok))
	if p := other.post("/reset-password", url.Values{"csrf": {anon}, "token": {tok}, "password": {"New1password"}, "password2": {"other"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"password2"`) {
		t.Errorf("mismatched passwords: got %d %s", p.status, p.body)
	}
	if p := other.post("/reset-password", url.Values{"csrf": {anon}, "token": {tok}, "password": {"New1password"}, "password2": {"New1password"}}); p.status != http.StatusOK {
		t.Fatalf("reset: %d %s", p.status, p.body)
	}
	if got := b.get("/console/"); got.status != http.StatusSeeOther {
		t.Errorf("a session from before the reset: got %d, want 303 to sign in", got.status)
	}
}

func TestSignInCountsInTheCredentialWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.authRate = pacing.Rate{Limit: 3, Window: 15 * time.Minute} })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	anon := tokenOf(t, b.get("/console/signin"))
	var last page
	for range 4 {
		last = b.post("/console/signin", url.Values{"csrf": {anon}, "email": {"ada@acme.test"}, "password": {"Guess1guess"}})
	}
	if last.status != http.StatusTooManyRequests {
		t.Errorf("the fourth sign-in within a window of 3: got %d, want 429", last.status)
	}
	// The pages themselves do not spend it.
	for range 5 {
		if p := b.get("/console/signin"); p.status != http.StatusOK {
			t.Fatalf("GET the sign-in page: %d", p.status)
		}
	}
}

func TestASignedInUserHasARateWindowOfTheirOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.generalRate = pacing.Rate{Limit: 4, Window: time.Minute} })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse") // two requests by address, one as the user
	stranger := e.browser()
	for stranger.get("/console/signin").status != http.StatusTooManyRequests {
	}
	// The office address is spent; the signed-in user is not.
	if p := ada.get("/console/devices"); p.status != http.StatusOK {
		t.Errorf("a signed-in page once the address's window is spent: got %d, want 200", p.status)
	}
	if p := ada.get("/console/devices"); p.header.Get("RateLimit-Remaining") != "1" {
		t.Errorf("the user's window: RateLimit-Remaining %q, want 1", p.header.Get("RateLimit-Remaining"))
	}
}

func TestFormErrorsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	anon := tokenOf(t, b.get("/console/signup"))
	form := url.Values{"csrf": {anon}, "company.name": {"Acme"}, "company.phone": {"12345"}, "owner.firstName": {"Ada"},
		"owner.lastName": {"L"}, "owner.email": {"ada@acme.test"}, "owner.password": {"Correct1horse"}, "password2": {"Correct1horse"}}
	p := b.post("/console/signup", form)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"company.phone"`) {
		t.Errorf("signup with a bad phone: got %d %s, want 400 naming company.phone", p.status, p.body)
	}
	// Without the JavaScript, the form comes back with the message beside the field.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/signup", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	back := read(t, res)
	if back.status != http.StatusSeeOther || !strings.Contains(back.location, "field=company.phone") {
		t.Fatalf("plain post: got %d to %q", back.status, back.location)
	}
	again := b.get(back.location)
	if !strings.Contains(again.body, `data-error-for="company.phone" id="err-company.phone">`) || strings.Contains(again.body, `id="err-company.phone"></span>`) {
		t.Errorf("the page does not show the error beside company.phone")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A device's SIMs read as a list: a slot with nothing reported is its name alone.
func TestDevicesPageListsSIMs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-acme", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	body := b.get("/console/devices").body
	// The phone's hello names the slots only.
	if !strings.Contains(body, "<dd>SIM1; SIM2</dd>") {
		t.Errorf("the SIMs of the device: want %q in\n%s", "SIM1; SIM2", body)
	}
}

// The settings page tells every user where AI agents connect (POST /mcp)
// and how; only an admin's page holds the key itself.
func TestSettingsShowsMCPEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "mcp@acme.test", "Correct1horse")
	admin := e.browser()
	admin.signIn("mcp@acme.test", "Correct1horse")
	got := admin.get("/console/settings")
	want := `<code id="mcp-url">` + e.url + `/mcp</code>`
	if got.status != http.StatusOK || !strings.Contains(got.body, want) || !strings.Contains(got.body, `"Authorization": "Bearer YOUR_API_KEY"`) {
		t.Fatalf("GET /console/settings: got %d, want the MCP address %s and a client configuration; body %s", got.status, want, got.body)
	}
}

// sendToMany sends "hi" from device to the n numbers +1555010xxxx, xxxx
// from "from" on, in one bulk send: n conversations.
func (e *env) sendToMany(t *testing.T, key, device string, from, n int) {
	t.Helper()
	msgs := make([]map[string]string, n)
	for i := range msgs {
		msgs[i] = map[string]string{"phone": fmt.Sprintf("+1555010%04d", from+i), "message": "hi"}
	}
	body, _ := json.Marshal(map[string]any{"device_fingerprint": device, "messages": msgs})
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/send-bulk", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := read(t, res); p.status != http.StatusOK {
		t.Fatalf("POST /chat/send-bulk: %d %s", p.status, p.body)
	}
}

// A device's conversations are listed the latest 200 first, with a line
// saying older ones are not listed; fewer are listed without it.
func TestMessagesPageListsTheLatestConversations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	send := func(from, n int) { e.sendToMany(t, key, "fp-1", from, n) }
	send(0, 199)
	if got := b.get("/console/messages?device=fp-1").body; strings.Count(got, `<li data-phone=`) != 199 || strings.Contains(got, `id="more-convs"`) {
		t.Fatalf("199 conversations: want all listed and no line about older ones")
	}
	send(199, 2)
	got := b.get("/console/messages?device=fp-1").body
	if strings.Count(got, `<li data-phone=`) != 200 || !strings.Contains(got, `id="more-convs"`) || strings.Contains(got, `data-phone="&#43;15550100000"`) || !strings.Contains(got, `data-phone="&#43;15550100001"`) {
		t.Fatalf("201 conversations: want the latest 200 listed, the oldest not, and the line about older ones")
	}
}

// An API key whose stored copy the server's keys cannot open (kept so by
// simrelay admin rotate-keys) cannot be shown: the settings page says so
// and still offers the rotation, which gives a key it shows again. The
// page was an error, its rotate button out of reach.
func TestSettingsWithAnUnreadableAPIKeyOffersItsRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	co, _, _, err := e.accounts.CreateCompany("Acme", account.OwnerInput{Email: "seal@acme.test", Password: "Correct1horse"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateCompany(co.ID, func(c *store.Company) error {
		c.APIKeySealed = []byte("not a sealed key")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	admin := e.browser()
	admin.signIn("seal@acme.test", "Correct1horse")
	got := admin.get("/console/settings")
	if got.status != http.StatusOK || !strings.Contains(got.body, `id="api-key-unreadable"`) || strings.Contains(got.body, `id="api-key"`) ||
		!strings.Contains(got.body, `action="/console/settings/api-key/rotate"`) {
		t.Fatalf("GET /console/settings with the key's copy unreadable: %d, want the page saying so with the rotation; body %s", got.status, got.body)
	}
	if p := admin.post("/console/settings/api-key/rotate", nil); p.status >= 400 {
		t.Fatalf("rotate: %d %s", p.status, p.body)
	}
	if got := admin.get("/console/settings"); got.status != http.StatusOK || !strings.Contains(got.body, `id="api-key"`) {
		t.Fatalf("GET /console/settings after the rotation: %d, want the new key shown; body %s", got.status, got.body)
	}
}

// TestInvitingAMemberAgainNamesTheEmailField: an invitation to an address
// the company already has is refused beside the e-mail address, the field
// to change (it was a banner alone, beside no field, and focused none).
func TestInvitingAMemberAgainNamesTheEmailField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	form := url.Values{"email": {"mo@acme.test"}, "firstName": {"Mo"}, "lastName": {"Member"}, "role": {"member"}}
	if p := b.post("/console/team/invite", form); p.status != http.StatusOK {
		t.Fatalf("first invitation: %d %s", p.status, p.body)
	}
	for _, addr := range []string{"mo@acme.test", "ada@acme.test"} {
		form.Set("email", addr)
		p := b.post("/console/team/invite", form)
		if p.status != http.StatusConflict || !strings.Contains(p.body, `"field":"email"`) || !strings.Contains(p.body, "already exists") {
			t.Errorf("inviting %s again: got %d %s, want 409 naming email", addr, p.status, p.body)
		}
	}
}

// TestMembersReadWhoChangesWhatTheyCannot: a member's page shows the
// company's settings, webhooks, team, plans and keyword switch read only,
// without the admins' buttons; it says that an admin changes them, where
// it left read-only fields with no word of why nothing could be saved.
// An admin's page says nothing of it.
func TestMembersReadWhoChangesWhatTheyCannot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	mo := e.member(ada)
	for path, says := range map[string]string{
		"/console/webhooks": "Only an admin changes the entries and the signing secret.",
		"/console/settings": "Only an admin changes the company's profile.",
		"/console/team":     "Only an admin invites members, changes roles and removes users.",
		"/console/billing":  "Only an admin switches the plan.",
		"/console/opt-outs": "Only an admin turns them off and on.",
	} {
		if p := mo.get(path); p.status != http.StatusOK || !strings.Contains(p.body, `<p class="muted" id="admin-only">`+says+`</p>`) {
			t.Errorf("%s for a member: %d, want %q", path, p.status, says)
		}
		if p := ada.get(path); p.status != http.StatusOK || strings.Contains(p.body, `id="admin-only"`) {
			t.Errorf("%s for an admin: %d, says only an admin changes it", path, p.status)
		}
	}
}

// TestDevicesPageSaysThePlanHasNoRoomForAPhone: a company whose plan's
// devices are all registered reads, beside "Pair a phone", that a new
// phone would be refused and what to do, with a link to the plans. It got
// a code and a panel that waited for a phone the server refused (the
// refusal told to the phone alone) until the code expired. A code still
// pairs a phone registered already (its fingerprint), so it is offered.
func TestDevicesPageSaysThePlanHasNoRoomForAPhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	const note = `id="device-limit"`
	if p := ada.get("/console/devices"); p.status != http.StatusOK || strings.Contains(p.body, note) {
		t.Fatalf("an unlimited plan's devices page: %d, says the plan is full", p.status)
	}
	if p := ada.post("/console/billing/subscribe", url.Values{"plan_id": {"free"}}); p.status != http.StatusOK {
		t.Fatalf("switch to Free: %d %s", p.status, p.body)
	}
	p := ada.get("/console/devices")
	want := `<p class="muted" id="device-limit">The company's plan allows 1 device and it is registered: a new phone cannot pair. Delete a device, or choose a larger plan on the <a href="/console/billing">billing page</a>.</p>`
	if p.status != http.StatusOK || !strings.Contains(p.body, want) {
		t.Errorf("the devices page on Free with its device: %d, want %s", p.status, want)
	}
	if !strings.Contains(p.body, `action="/console/pairing"`) {
		t.Error("the full plan's page offers no pairing code (a phone registered already re-pairs with one)")
	}
}

// TestSettingsFieldsSayWhatTheyHold: the company's fields say their
// purpose as the sign-up form's do (a phone keypad for the phone, the
// browser's autofill for the organisation and its address: WCAG 1.3.5);
// they were plain text fields.
func TestSettingsFieldsSayWhatTheyHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	p := ada.get("/console/settings")
	for id, want := range map[string]string{
		"co-name": `type="text" autocomplete="organization"`, "co-phone": `type="tel" autocomplete="tel"`,
		"co-address": `type="text" autocomplete="street-address"`, "co-city": `type="text" autocomplete="address-level2"`,
		"co-state": `type="text" autocomplete="address-level1"`, "co-country": `type="text" autocomplete="country"`,
		"co-region": `type="text" autocomplete="off"`,
	} {
		at := strings.Index(p.body, `<input id="`+id+`"`)
		if at < 0 {
			t.Errorf("the settings page has no input %s", id)
			continue
		}
		if tag := p.body[at : at+strings.Index(p.body[at:], ">")]; !strings.Contains(tag, want) {
			t.Errorf("the settings page's %s: %s, want %s", id, tag, want)
		}
	}
}

// TestDeliveriesLogIsNamedDeliveries: the deliveries log's section is
// named by its heading alone; the refresh link sat inside the heading, so
// the section and the heading read "Deliveries refresh".
func TestDeliveriesLogIsNamedDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	p := ada.get("/console/webhooks")
	for _, want := range []string{`<h2 id="log-h">Deliveries</h2>`, `<a href="/console/webhooks">Refresh the deliveries</a>`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the webhooks page has no %s", want)
		}
	}
}

// TestSignInUnverifiedSaysHowToGetAnotherLink: an owner who signed up and
// lost the verification mail is told at sign-in how to get a link that
// verifies the address (a password reset's does), after the API's own
// sentence; there is no other way to ask for one, and the refusal said only
// to follow the link in the message.
func TestSignInUnverifiedSaysHowToGetAnotherLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	anon := tokenOf(t, b.get("/console/signup"))
	if p := b.post("/console/signup", url.Values{"csrf": {anon}, "company.name": {"Acme"}, "company.phone": {"+14155550100"}, "owner.firstName": {"Ada"},
		"owner.lastName": {"L"}, "owner.email": {"ada@acme.test"}, "owner.password": {"Correct1horse"}, "password2": {"Correct1horse"}}); p.status != http.StatusOK {
		t.Fatalf("sign up: %d %s", p.status, p.body)
	}
	anon = tokenOf(t, b.get("/console/signin"))
	p := b.post("/console/signin", url.Values{"csrf": {anon}, "email": {"ada@acme.test"}, "password": {"Correct1horse"}})
	var out struct{ Error, Message string }
	if err := json.Unmarshal([]byte(p.body), &out); err != nil || p.status != http.StatusForbidden || out.Error != "email_not_verified" {
		t.Fatalf("unverified sign-in: %d %s", p.status, p.body)
	}
	const want = "Verify your e-mail address first: follow the link in the message we sent. No message? \"Forgot your password?\" below e-mails a link that verifies the address too."
	if out.Message != want {
		t.Errorf("unverified sign-in says %q, want %q", out.Message, want)
	}
}

// TestPhoneLabelsSayInternationalFormat: the phone fields' labels name the
// format as their error does ("must be in international format: + then 8
// to 15 digits") and as the pages write numbers, with an example; they said
// "E.164", a word of the standard that no message of the console explains.
func TestPhoneLabelsSayInternationalFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ada := e.browser()
	if p := ada.get("/console/signup"); !strings.Contains(p.body, `<label for="company.phone">Company phone (international format, such as +14155550100)</label>`) || strings.Contains(p.body, "E.164") {
		t.Error("the sign-up page's phone label does not say international format")
	}
	ada.signIn("ada@acme.test", "Correct1horse")
	for path, want := range map[string]string{
		"/console/settings": `<label for="co-phone">Phone (international format, such as &#43;14155550100)</label>`,
		"/console/opt-outs": `<label for="optout-phone">Phone (international format, such as +14155550100)</label>`,
	} {
		if p := ada.get(path); !strings.Contains(p.body, want) || strings.Contains(p.body, "E.164") {
			t.Errorf("%s: want %s and no E.164", path, want)
		}
	}
}

// TestMoreNumbersWrittenInInternationalFormat: a SIM's number on the
// devices page and an opt-out entry's Remove button (its name and its
// question) write the number as the lists do ("+44 7400 123456"); they
// showed the E.164 string beside the formatted one.
func TestMoreNumbersWrittenInInternationalFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runPhone(e.registerPhone(e.pairingCode(key), "fp-1"), proto.Hello{AppVersion: "1.2.3", SelectedSIM: "BOTH",
		SIMs: []proto.SIM{{Slot: "SIM1", Carrier: "Acme Mobile", PhoneNumber: "+15550109001"}, {Slot: "SIM2"}}}, false)
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	if p := ada.get("/console/devices"); !strings.Contains(p.body, `SIM1: <bdi>Acme Mobile</bdi> <bdi>&#43;1 555-010-9001</bdi>`) {
		t.Error("the devices page does not write the SIM's number in international format")
	}
	if p := ada.post("/console/opt-outs", url.Values{"phone": {"+447400123456"}}); p.status != http.StatusOK {
		t.Fatalf("add: %d %s", p.status, p.body)
	}
	p := ada.get("/console/opt-outs")
	for _, want := range []string{`data-confirm="Take &#43;44 7400 123456 off the list? Sends to it will be allowed again."`, `aria-label="Remove &#43;44 7400 123456"`, `name="phone" value="&#43;447400123456"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the opt-out list has no %s", want)
		}
	}
}

// TestEmailedPagesLinkToANewLink: the pages an e-mailed link opens say,
// when the link is used or expired, "Ask for a new one"; they now offer
// where (the forgot-password page, whose link sets the password and
// verifies the address, for an invitation too) and the way to sign in.
// They linked nowhere: the person was left on a page with no way on.
func TestEmailedPagesLinkToANewLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	for _, path := range []string{"/verify-email?token=bogus", "/reset-password?token=bogus", "/verify-email", "/reset-password"} {
		p := b.get(path)
		if p.status != http.StatusOK || !strings.Contains(p.body, `<a href="/console/forgot-password">Ask for a new link</a>`) || !strings.Contains(p.body, `<a href="/console/signin">Sign in</a>`) {
			t.Errorf("%s: %d, no link to ask for a new link and to sign in", path, p.status)
		}
	}
}
