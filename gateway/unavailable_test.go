package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store/postgres"
)

// A phone that links while the store's PostgreSQL database does not answer
// is told to come back (503 unavailable with Retry-After), as every route
// tells its client, not that the server failed (500): nothing is wrong with
// the phone or its token, and the operator's log names the database.
func TestLinkWhileTheDatabaseIsGoneAnswers503(t *testing.T) {
	t.Parallel()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st, err := postgres.Open(context.Background(), relay.URL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := newRigOn(t, st, Config{}, time.Now, nil)
	token := r.pair("db-gone-1")
	relay.Cut()
	_, res, err := r.dial(token, nil)
	if err == nil || res == nil {
		t.Fatalf("linked with the database gone: %v", err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "5" || apiError(t, res) != "unavailable" {
		t.Fatalf("with the database gone: HTTP %d, Retry-After %q; want 503 unavailable with Retry-After 5", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// A fleet reconnecting through the outage is one line per 10 s, not one
	// per phone (the hub's clock is the real one: these dials take far less).
	for range 3 {
		if _, res, _ := r.dial(token, nil); res == nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("another link with the database gone: %v, want 503", res)
		}
	}
	if n := strings.Count(r.logs.String(), `msg="device authentication failed`); n != 1 {
		t.Fatalf("4 links refused within 10 s logged %d lines, want 1:\n%s", n, r.logs.String())
	}
}
