package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// A server started with SIMRELAY_SIGNUP=closed (--signup's twin) refuses
// POST /auth/signup 403 signup_closed and stores nothing (the address has
// no account to log in to), its console says sign-up is closed, and its
// log says so; the company the operator made with admin create-company
// works and invites its users. The real binary is run, as the README runs
// it.
func TestServeSignupClosed(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	cmd := exec.Command(bin, serveArgs(st)...)
	cmd.Env = append(os.Environ(), "SIMRELAY_SIGNUP=closed")
	srv := launchServer(t, cmd)

	send := func(method, path, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.url+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := testhttp.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	signup := `{"company":{"name":"Stranger Co","phone":"+15550100123"},"owner":{"firstName":"Sam","lastName":"Stranger","email":"sam@stranger.test","password":"Change-me-123"}}`
	if code, body := send("POST", "/auth/signup", "", signup); code != http.StatusForbidden || !strings.Contains(body, `"error":"signup_closed"`) {
		t.Fatalf("POST /auth/signup: got %d %s, want 403 signup_closed", code, body)
	}
	if code, body := send("POST", "/auth/login", "", `{"email":"sam@stranger.test","password":"Change-me-123"}`); code != http.StatusUnauthorized || !strings.Contains(body, "invalid_credentials") {
		t.Fatalf("login as the refused sign-up: got %d %s, want 401 invalid_credentials (no such account)", code, body)
	}
	if code, body := send("GET", "/console/signup", "", ""); code != http.StatusOK || !strings.Contains(body, "Sign-up is closed") || strings.Contains(body, "<form") {
		t.Fatalf("GET /console/signup: got %d, want the page saying sign-up is closed, no form:\n%s", code, body)
	}
	if code, body := send("POST", "/users", apiKey, `{"firstName":"Mo","lastName":"Member","email":"mo@example.com","role":"member"}`); code != http.StatusCreated {
		t.Fatalf("POST /users (an invitation): got %d %s, want 201", code, body)
	}
	if log := srv.stderr.String(); !strings.Contains(log, "signup=closed") {
		t.Errorf("the listening line does not say sign-up is closed:\n%s", log)
	}
}
