package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/pacing"
)

// A route that panics answers 500 internal, and the log line that tells the
// operator about it says where it panicked, as an MCP tool's does: the
// panic's value alone ("invalid memory address or nil pointer
// dereference") names no function, and the stack is gone once the
// recovery has returned.
func TestRoutePanicLogsWhereItPanicked(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	reg := prometheus.NewRegistry()
	rate := pacing.Rate{Limit: 100, Window: time.Minute}
	// No store: /readyz's look at it panics, as a bug in a handler would.
	s, err := New(Config{GeneralRate: rate, AuthRate: rate}, Deps{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Registry: reg, Gatherer: reg, Now: time.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	res, err := testhttp.Client.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusInternalServerError {
		t.Fatalf("GET /readyz with a handler that panics: %d, want 500", res.StatusCode)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="request failed"`) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no request failed line in the log:\n%s", logs.String())
	}
	if !strings.Contains(line, "panic: ") || !strings.Contains(line, "httpapi.(*Server).readyz") {
		t.Errorf("the log line of the panic does not name the function that panicked:\n%s", line)
	}
}
