package gateway

import (
	"context"
	"net/http"
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
}
