package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// loginWith is POST /auth/login from the nth client address with a device
// cookie ("" for none).
func (e *env) loginWith(n int, cookie, email, password string) resp {
	e.t.Helper()
	h := map[string]string{"X-Forwarded-For": fmt.Sprintf("2001:db8:%x::1", n)}
	if cookie != "" {
		h["Cookie"] = account.DeviceCookie + "=" + cookie
	}
	return e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": password}, header: h})
}

// deviceCookie is the device cookie an answer sets, checked for its
// attributes (the test server's public URL is plain http: no Secure, no
// __Host- prefix); "" if it sets none.
func deviceCookie(t *testing.T, h http.Header) string {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name != account.DeviceCookie {
			continue
		}
		if c.Value == "" || c.Path != "/" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure ||
			c.MaxAge != int(account.DeviceLifetime/time.Second) {
			t.Fatalf("the device cookie %s: want a value, Path=/, HttpOnly, SameSite=Strict, Max-Age=%d", c, int(account.DeviceLifetime/time.Second))
		}
		return c.Value
	}
	return ""
}

// spendLogins spends the e-mail address's failed logins of the window from
// the fewest client addresses that can (each has a share of
// account.ClientShare), from client first on, as an attacker would.
func (e *env) spendLogins(first int, email string) {
	e.t.Helper()
	for i := range account.DefaultLoginRate.Limit {
		e.want(e.loginFrom(first+i/account.ClientShare, email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	}
	e.wantThrottled(e.loginFrom(first+99, email, "Wrong-Horse-9"), "a failure past the address's limit")
}

// A successful login sets a device cookie beside the binding body. While 4
// attacking client addresses hold the address's failed logins spent, its
// owner's device cookie still signs the owner in, from any address (one
// whose share is spent too), the right password only; without it the
// owner is refused as before.
func TestDeviceCookieLetsTheOwnerIn(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	r := e.loginWith(1, "", acme.email, acme.password)
	e.want(r, http.StatusOK, "")
	cookie := deviceCookie(t, r.Header)
	if cookie == "" {
		t.Fatalf("a successful login set no device cookie: %v", r.Header.Values("Set-Cookie"))
	}
	keys := make([]string, 0, len(r.Body))
	for k := range r.Body {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got, want := strings.Join(keys, ","), "accessToken,expiresIn,refreshToken,tokenType,user"; got != want || strings.Contains(string(r.Raw), cookie) {
		t.Fatalf("the login's body holds %s (or the cookie), want %s as before: %s", got, want, r.Raw)
	}

	e.spendLogins(10, acme.email)
	e.wantThrottled(e.loginWith(2, "", acme.email, acme.password), "the owner without the cookie")
	e.want(e.loginWith(2, cookie, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	for _, client := range []int{2, 10} { // 10 spent its share
		r := e.loginWith(client, cookie, acme.email, acme.password)
		e.want(r, http.StatusOK, "")
		if fresh := deviceCookie(t, r.Header); fresh == "" || fresh == cookie {
			t.Fatalf("a login with a device cookie set %q, want a fresh one", fresh)
		}
	}
	e.wantThrottled(e.loginWith(3, "", acme.email, acme.password), "the owner without the cookie, after")
}

// A device cookie has a failure count of its own: its wrong passwords
// count against it, not against the e-mail address; past
// account.DeviceFailures in a window it counts as none, and the login
// takes the untrusted path (today's rules), while another cookie of the
// owner's stays trusted.
func TestDeviceCookieFailuresCountAgainstTheCookie(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	r := e.loginWith(1, "", acme.email, acme.password)
	e.want(r, http.StatusOK, "")
	cookie := deviceCookie(t, r.Header)
	r = e.loginWith(2, "", acme.email, acme.password)
	e.want(r, http.StatusOK, "")
	other := deviceCookie(t, r.Header)

	for range account.DeviceFailures {
		e.want(e.loginWith(1, cookie, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	}
	// Nothing of them counted against the address: its whole limit is left
	// to untrusted clients.
	e.spendLogins(10, acme.email)
	// The spent cookie is no cookie: the address's refusal answers it, the
	// right password too.
	e.wantThrottled(e.loginWith(1, cookie, acme.email, acme.password), "the cookie past its failures")
	e.want(e.loginWith(1, other, acme.email, acme.password), http.StatusOK, "")
}

// Only a valid cookie of the address exempts: another account's cookie
// (stolen, or the attacker's own), one tampered with, one forged, and one
// older than account.DeviceLifetime are ignored, the login throttled as
// any untrusted client's.
func TestDeviceCookieOnlyAValidOneOfTheAccount(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	beta := e.newCompany("Beta", "bob@beta.test")
	r := e.loginWith(1, "", beta.email, beta.password)
	e.want(r, http.StatusOK, "")
	bobs := deviceCookie(t, r.Header)
	r = e.loginWith(1, "", acme.email, acme.password)
	e.want(r, http.StatusOK, "")
	anas := deviceCookie(t, r.Header)
	raw, err := base64.RawURLEncoding.DecodeString(anas)
	if err != nil {
		t.Fatal(err)
	}
	// Ten seconds short of the cookie's lifetime, then the address's
	// failures spent.
	e.clock.Advance(account.DeviceLifetime - 10*time.Second)
	e.spendLogins(10, acme.email)

	for _, c := range []struct{ what, cookie string }{
		{"another account's cookie", bobs},
		{"a tampered cookie", base64.RawURLEncoding.EncodeToString(append(append([]byte{}, raw[:len(raw)-1]...), raw[len(raw)-1]^1))},
		{"a tampered issue time", base64.RawURLEncoding.EncodeToString(append(append(append([]byte{}, raw[:20]...), raw[20]^1), raw[21:]...))},
		{"a forged cookie", base64.RawURLEncoding.EncodeToString(make([]byte, len(raw)))},
		{"a cookie of another length", anas + "AA"},
		{"garbage", "not a cookie"},
	} {
		e.wantThrottled(e.loginWith(2, c.cookie, acme.email, acme.password), c.what)
	}
	e.want(e.loginWith(2, anas, acme.email, acme.password), http.StatusOK, "")
	e.clock.Advance(10 * time.Second) // within the address's window
	e.want(e.loginWith(2, anas, acme.email, acme.password), http.StatusTooManyRequests, "rate_limited")
}

// The console's sign-in sets the same device cookie and honours it as
// the API's login does; a cookie of either works at the other.
func TestConsoleSignInDeviceCookie(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	signin := func(n int, cookie, password string) resp {
		ck := "simrelay_csrf=form-token-of-this-test"
		if cookie != "" {
			ck += "; " + account.DeviceCookie + "=" + cookie
		}
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
			"Cookie": ck, "X-CSRF-Token": "form-token-of-this-test", "X-Forwarded-For": fmt.Sprintf("198.51.100.%d", n)}
		return e.do(call{method: "POST", path: "/console/signin", header: h,
			body: url.Values{"email": {acme.email}, "password": {password}, "csrf": {"form-token-of-this-test"}}.Encode()})
	}
	r := signin(1, "", acme.password)
	e.want(r, http.StatusOK, "")
	console := deviceCookie(t, r.Header)
	if console == "" {
		t.Fatalf("the console's sign-in set no device cookie: %v", r.Header.Values("Set-Cookie"))
	}
	r = e.loginWith(1, "", acme.email, acme.password)
	e.want(r, http.StatusOK, "")
	api := deviceCookie(t, r.Header)

	e.spendLogins(10, acme.email)
	e.wantThrottled(signin(2, "", acme.password), "the console's sign-in without the cookie")
	e.want(signin(2, console, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	r = signin(2, console, acme.password)
	e.want(r, http.StatusOK, "")
	if deviceCookie(t, r.Header) == "" {
		t.Fatal("the console's sign-in with a device cookie set no fresh one")
	}
	e.want(signin(3, api, acme.password), http.StatusOK, "")
	e.want(e.loginWith(3, console, acme.email, acme.password), http.StatusOK, "")
}

// A REST client keeps the device cookie in a cookie jar, as Go's
// http.Client with a cookiejar does: the jar sends it back with the next
// login, which then gets past the address's spent failures.
func TestDeviceCookieInAClientsJar(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: testhttp.Transport, Jar: jar}
	login := func() int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.url+"/auth/login",
			strings.NewReader(fmt.Sprintf(`{"email":%q,"password":%q}`, acme.email, acme.password)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", "2001:db8:1::1")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := login(); got != http.StatusOK {
		t.Fatalf("the first login: %d", got)
	}
	e.spendLogins(10, acme.email)
	if got := login(); got != http.StatusOK {
		t.Fatalf("the login with the jar's cookie over the address's spent failures: %d, want 200", got)
	}
}
