package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The served document names the server it comes from (--public-url) as
// its server, so that a client generated from it, or a "try it" page,
// calls this server: it named the default listen address,
// http://127.0.0.1:8080, whatever the server's address.
func TestOpenAPINamesThisServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(call{method: "GET", path: "/openapi.json"})
	e.want(r, http.StatusOK, "")
	var doc struct {
		OpenAPI string `json:"openapi"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != e.url {
		t.Fatalf("servers %+v, want this server's public URL %s alone", doc.Servers, e.url)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Paths) < 50 {
		t.Fatalf("the served document lost its version or paths: %q, %d paths", doc.OpenAPI, len(doc.Paths))
	}
}
