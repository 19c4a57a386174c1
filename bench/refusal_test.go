package bench

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// A request the server refuses fails its phase, naming the answer: it is
// no figure. The phases left the refused requests out and printed what
// was left, a rate of the few answered or, with none, percentiles of
// 0.00 ms under their targets; a server that refused every send after the
// 100th (a plan's limit) looked faster than it is.
func TestBenchPhaseFailsOnARefusal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":"plan_limit_reached"}`))
	}))
	defer srv.Close()
	api := &apiClient{base: srv.URL, key: "k", hc: testhttp.Client}
	wantRefusal := func(phase string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "answered 429") || !strings.Contains(err.Error(), "plan_limit_reached") {
			t.Errorf("%s against a server that refuses all: error %v, want one naming the 429 and its body", phase, err)
		}
	}
	f := &fleet{lat: make(chan time.Duration, 16)}
	fps := []string{"phone-1", "phone-2"}
	_, err := throughput(t.Context(), []*apiClient{api}, f, fps, 2, 100*time.Millisecond)
	wantRefusal("throughput", err)
	_, err = latency(t.Context(), func(int) *apiClient { return api }, f, fps, 20, 100*time.Millisecond)
	wantRefusal("latency", err)
	_, _, err = lists(t.Context(), api, fps, 100, 3)
	wantRefusal("lists", err)
	_, _, err = dashboards(t.Context(), api, 3)
	wantRefusal("dashboards", err)
}
