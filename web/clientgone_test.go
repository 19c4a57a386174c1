package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/syncbuf"
)

// Every way the console answers a failure (a page's, a form's, the
// JavaScript's) records a request whose browser went away while it waited
// as 499 and logs it at debug, as the API does, not as a 500 and
// "console request failed". A cancellation while the browser still waits
// is a failure.
func TestClientGoneIs499(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	c := &Console{deps: Deps{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Now: time.Now}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := fmt.Errorf("store: device 1: %w", context.Canceled)
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"page", func(w http.ResponseWriter, r *http.Request) { c.fail(w, r, nil, gone) }},
		{"form", func(w http.ResponseWriter, r *http.Request) { c.answerErr(w, r, member, nil, Prefix+"/devices", gone) }},
		{"javascript", func(w http.ResponseWriter, r *http.Request) { c.answerJSON(w, r, gone) }},
	} {
		w := httptest.NewRecorder()
		tc.answer(w, httptest.NewRequest(http.MethodPost, Prefix+"/devices/fp-1", nil).WithContext(ctx))
		if w.Code != 499 || w.Body.Len() != 0 {
			t.Errorf("%s: got %d %q, want 499 and no body", tc.name, w.Code, w.Body.String())
		}
	}
	if got := logs.String(); strings.Contains(got, "console request failed") || strings.Count(got, "level=DEBUG msg=\"console request ended by its client\"") != 3 {
		t.Fatalf("log, want three debug lines and no failure:\n%s", got)
	}
	// The same cancellation while the browser waits is the server's failure.
	w := httptest.NewRecorder()
	c.answerJSON(w, httptest.NewRequest(http.MethodGet, Prefix+"/messages/thread", nil), gone)
	if w.Code != http.StatusInternalServerError || !strings.Contains(logs.String(), "console request failed") {
		t.Fatalf("a cancellation of the server's own: got %d, log:\n%s", w.Code, logs.String())
	}
}
