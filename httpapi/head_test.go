package httpapi_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// TestHeadWhereverGet: every GET route of the OpenAPI document answers HEAD
// with GET's status and headers and no body (uptime monitors use HEAD).
func TestHeadWhereverGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, withAdminToken)
	c := e.newCompany("Acme", "owner@acme.test")
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(e.do(call{method: "GET", path: "/openapi.json"}).Raw, &doc); err != nil {
		t.Fatal(err)
	}
	// The document tells clients what HEAD does: what this test holds.
	if !strings.Contains(doc.Info.Description, "`HEAD` answers wherever `GET` does") {
		t.Errorf("openapi.json's description does not say that HEAD answers wherever GET does")
	}
	var paths []string
	for p, ops := range doc.Paths {
		if _, ok := ops["get"]; ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range append(paths, "/healthz", "/readyz", "/metrics", "/openapi.json") {
		path := strings.NewReplacer("{id}", "1", "{code}", "ABCD2345", "{device_fingerprint}", "none", "{queueId}", "none").Replace(p)
		token := c.apiKey
		if p == "/admin/backup" {
			token = testAdminToken
		}
		t.Run(p, func(t *testing.T) {
			req := func(method string) (*http.Response, int) {
				r, err := http.NewRequest(method, e.url+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				r.Header.Set("Authorization", "Bearer "+token)
				res, err := testhttp.Client.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				n := 0
				buf := make([]byte, 4096)
				for {
					k, err := res.Body.Read(buf)
					n += k
					if err != nil {
						break
					}
				}
				return res, n
			}
			get, _ := req(http.MethodGet)
			head, n := req(http.MethodHead)
			if head.StatusCode == http.StatusMethodNotAllowed || head.StatusCode != get.StatusCode {
				t.Fatalf("HEAD %s: got %d, want GET's %d", path, head.StatusCode, get.StatusCode)
			}
			if n != 0 {
				t.Errorf("HEAD %s: got a %d-byte body, want none", path, n)
			}
			if g, h := get.Header.Get("Content-Type"), head.Header.Get("Content-Type"); g != h {
				t.Errorf("HEAD %s: Content-Type %q, GET's %q", path, h, g)
			}
			// The other headers GET sends, but those that change from one
			// request to the next, and a length known only once the
			// content is made: a streamed answer's (chunked), and the
			// backup's, whose copy HEAD does not take (RFC 9110 9.3.2).
			stamp := regexp.MustCompile(`\d{8}-\d{6}`)
			for name := range get.Header {
				switch name {
				case "Date", "Ratelimit-Remaining", "Ratelimit-Reset", "Transfer-Encoding":
					continue
				case "Content-Length":
					if p == "/admin/backup" {
						continue
					}
				}
				g := stamp.ReplaceAllString(strings.Join(get.Header.Values(name), ", "), "TIME")
				h := stamp.ReplaceAllString(strings.Join(head.Header.Values(name), ", "), "TIME")
				if g != h {
					t.Errorf("HEAD %s: %s %q, GET's %q", path, name, h, g)
				}
			}
		})
	}
}
