package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// net/http takes any token as a request method, and each method the
// metrics name is a counter and a histogram kept as long as the process
// runs: a client making up methods (on /healthz, which counts toward no
// limit, as fast as it liked) added series without end. The metrics name
// the methods of HTTP; any other is OTHER.
func TestMetricsNameNoInventedMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for i := range 40 {
		for _, path := range []string{"/healthz", "/chat/send", "/no-such-route"} {
			req, err := http.NewRequest(fmt.Sprintf("INVENTED%02d", i), e.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+a.apiKey)
			res, err := testhttp.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed && res.StatusCode != http.StatusNotFound {
				t.Fatalf("%s %s: %d", req.Method, path, res.StatusCode)
			}
		}
	}
	e.want(e.do(call{method: "GET", path: "/company", token: a.apiKey}), http.StatusOK, "")
	m := e.do(call{method: "GET", path: "/metrics"})
	e.want(m, http.StatusOK, "")
	text := string(m.Raw)
	if strings.Contains(text, "INVENTED") {
		t.Errorf("the metrics name methods a client made up: %d series", strings.Count(text, "INVENTED"))
	}
	for _, want := range []string{
		`simrelay_http_requests_total{method="OTHER",route="/healthz",status="405"} 40`,
		`simrelay_http_requests_total{method="OTHER",route="/chat/send",status="405"} 40`,
		`simrelay_http_requests_total{method="OTHER",route="unmatched",status="404"} 40`,
		`simrelay_http_requests_total{method="GET",route="/company",status="200"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
}
