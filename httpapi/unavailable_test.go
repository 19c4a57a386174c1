package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A database out of reach is the server's trouble, but not a fault the
// client can do nothing about: 503 with a Retry-After, never 500.
func TestStoreUnavailableIs503(t *testing.T) {
	t.Parallel()
	s := &Server{deps: Deps{Logger: slog.New(slog.DiscardHandler), Now: time.Now}}
	pe, ok := s.domainProblem(fmt.Errorf("sms: send: %w", fmt.Errorf("store: put message: %w: dial unix: refused", store.ErrUnavailable)))
	if !ok || pe.Code != problem.Unavailable || pe.Status() != http.StatusServiceUnavailable || pe.RetryAfter != outage.RetryAfter {
		t.Fatalf("got %+v (%v), want 503 unavailable with Retry-After %d", pe, ok, outage.RetryAfter)
	}
}
