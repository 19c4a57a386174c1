package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestProbesMetricsAndDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.want(e.do(call{method: "GET", path: "/healthz"}), http.StatusOK, "")
	if r := e.do(call{method: "GET", path: "/readyz"}); r.Status != http.StatusOK || r.str("status") != "ready" {
		t.Fatalf("readyz: got %d %s", r.Status, r.Raw)
	}
	e.do(call{method: "GET", path: "/company"}) // a 401 to count
	m := e.do(call{method: "GET", path: "/metrics"})
	for _, want := range []string{
		`simrelay_http_requests_total{method="GET",route="/company",status="401"} 1`,
		`simrelay_http_request_duration_seconds_bucket{method="GET",route="/company"`,
	} {
		if !strings.Contains(string(m.Raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	doc := e.do(call{method: "GET", path: "/openapi.json"})
	var parsed struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc.Raw, &parsed); err != nil || !strings.HasPrefix(parsed.OpenAPI, "3.1") || len(parsed.Paths) == 0 {
		t.Fatalf("openapi.json: %v, version %q, %d paths", err, parsed.OpenAPI, len(parsed.Paths))
	}
}
