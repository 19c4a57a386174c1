package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"
)

// TestNoPrettyParameter: ?pretty changes no answer. Echo indented every
// answer written through c.JSON for a request carrying it, a parameter no
// document named (and one the streamed and pre-encoded answers ignored);
// like any unknown query parameter it is ignored now, answers and errors
// alike compact.
func TestNoPrettyParameter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.newCompany("Acme", "owner@acme.test")
	for _, k := range []struct {
		path   string
		status int
	}{
		{"/users/me", http.StatusOK},
		{"/company", http.StatusOK},
		{"/dashboard/summary", http.StatusOK},
		{"/analytics", http.StatusOK},
		{"/pools/9999", http.StatusNotFound},
		{"/chat/messages", http.StatusBadRequest},
	} {
		plain := e.do(call{method: "GET", path: k.path, token: c.access})
		pretty := e.do(call{method: "GET", path: k.path + "?pretty", token: c.access})
		if plain.Status != k.status || pretty.Status != k.status {
			t.Fatalf("GET %s: %d, with ?pretty %d; want %d", k.path, plain.Status, pretty.Status, k.status)
		}
		if bytes.Contains(pretty.Raw, []byte("\n ")) || !bytes.Equal(bytes.TrimSpace(pretty.Raw), bytes.TrimSpace(plain.Raw)) {
			t.Errorf("GET %s?pretty answered\n%s\nwithout it\n%s", k.path, pretty.Raw, plain.Raw)
		}
	}
}
