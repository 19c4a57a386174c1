package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// heldBody starts a request whose headers reach the server while its body
// waits: the server asks for the body (its 100 Continue comes once the route
// reads it, after the credential was checked), then the test changes what the
// credential may do, and only then sends the body. It returns the answer's
// status and error code.
func (e *env) heldBody(method, path, token, body string, meanwhile func()) (int, string) {
	e.t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(method, e.url+path, pr)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	asked := make(chan struct{})
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got100Continue: func() { close(asked) },
	}))
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	type answer struct {
		res *http.Response
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := (&http.Client{Transport: tr}).Do(req)
		done <- answer{res, err}
	}()
	select {
	case <-asked:
	case a := <-done:
		e.t.Fatalf("%s %s answered before its body was asked for: %v %v", method, path, a.res, a.err)
	case <-time.After(30 * time.Second):
		e.t.Fatalf("%s %s: no 100 Continue within 30 s", method, path)
	}
	meanwhile()
	if _, err := io.WriteString(pw, body); err != nil {
		e.t.Fatal(err)
	}
	pw.Close()
	a := <-done
	if a.err != nil {
		e.t.Fatal(a.err)
	}
	defer a.res.Body.Close()
	raw, _ := io.ReadAll(a.res.Body)
	code := ""
	if i := strings.Index(string(raw), `"error":"`); i >= 0 {
		code, _, _ = strings.Cut(string(raw[i+len(`"error":"`):]), `"`)
	}
	return a.res.StatusCode, code
}

// A credential is checked again once the request's body has arrived: a send
// whose headers came before its API key was rotated, or before its user was
// deleted, answers 401 and stores nothing, and an admin demoted while the
// body was on its way gets 403 on an admin route. The body may take up to the
// server's read timeout, a minute, to arrive: without the second check, a
// leaked key's requests begun before the rotation acted for that long after it.
func TestCredentialCheckedAgainAfterBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.example")

	optOut := func(n int) string { return fmt.Sprintf(`{"phone":"+1555765%04d"}`, n) }
	listed := func(token string) string {
		r := e.do(call{method: "GET", path: "/opt-outs", token: token})
		e.want(r, http.StatusOK, "")
		return string(r.Raw)
	}

	// The API key, rotated while the body is on its way.
	old := a.apiKey
	var fresh string
	status, code := e.heldBody("POST", "/opt-outs", old, optOut(1), func() {
		r := e.do(call{method: "POST", path: "/account/api-key/rotate", token: a.access})
		e.want(r, http.StatusOK, "")
		fresh = r.str("apiKey")
	})
	if status != http.StatusUnauthorized || code != "unauthorized" {
		t.Fatalf("a send with a key rotated before its body came: %d %q, want 401 unauthorized", status, code)
	}
	if l := listed(fresh); strings.Contains(l, "+15557650001") {
		t.Fatalf("the refused request stored its entry: %s", l)
	}

	// A member, deleted while the body is on its way.
	id, access := e.phonesInviteMember(a, "max@acme.example")
	status, code = e.heldBody("POST", "/opt-outs", access, optOut(2), func() {
		e.want(e.do(call{method: "DELETE", path: fmt.Sprintf("/users/%.0f", id), token: a.access}), http.StatusOK, "")
	})
	if status != http.StatusUnauthorized || code != "unauthorized" {
		t.Fatalf("a send by a user deleted before its body came: %d %q, want 401 unauthorized", status, code)
	}
	if l := listed(fresh); strings.Contains(l, "+15557650002") {
		t.Fatalf("the refused request stored its entry: %s", l)
	}

	// An admin, demoted while the body of an admin-only change is on its way.
	id, access = e.phonesInviteMember(a, "ada@acme.example")
	e.want(e.do(call{method: "PATCH", path: fmt.Sprintf("/users/%.0f", id), token: a.access, body: map[string]any{"role": "admin"}}), http.StatusOK, "")
	status, code = e.heldBody("PATCH", "/company", access, `{"name":"Renamed"}`, func() {
		e.want(e.do(call{method: "PATCH", path: fmt.Sprintf("/users/%.0f", id), token: a.access, body: map[string]any{"role": "member"}}), http.StatusOK, "")
	})
	if status != http.StatusForbidden || code != "forbidden" {
		t.Fatalf("an admin change by an admin demoted before its body came: %d %q, want 403 forbidden", status, code)
	}
	r := e.do(call{method: "GET", path: "/company", token: fresh})
	e.want(r, http.StatusOK, "")
	if r.str("name") != "Acme" {
		t.Fatalf("the refused change was made: %s", r.Raw)
	}

	// A credential that stays good is not troubled by the second check.
	status, code = e.heldBody("POST", "/opt-outs", fresh, optOut(3), func() {})
	if status != http.StatusCreated {
		t.Fatalf("a held body with a good key: %d %q, want 201", status, code)
	}
}
