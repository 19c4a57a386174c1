package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPages(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for path, wantPost := range map[string]string{
		"/verify-email":   `fetch("/auth/verify-email"`,
		"/reset-password": `fetch("/auth/reset-password"`,
	} {
		resp, err := http.Get(srv.URL + path + "?token=abc")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: got status %d, want 200", path, resp.StatusCode)
		}
		if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("GET %s: got Referrer-Policy %q, want no-referrer", path, got)
		}
		if !strings.Contains(string(body), wantPost) {
			t.Errorf("GET %s: page does not post to the API (%s)", path, wantPost)
		}
	}
	resp, err := http.Post(srv.URL+"/verify-email", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /verify-email: got %d, want 405", resp.StatusCode)
	}
}
