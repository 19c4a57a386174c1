package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/simrelay/simrelay/problem"
)

// A refusal that says when to ask again (a file's download beyond the
// company's under way, answered 429 by media.Serve) carries Retry-After on
// the console's error page and in its JSON, as the API's does.
func TestConsoleRefusalsCarryRetryAfter(t *testing.T) {
	t.Parallel()
	c, err := New(Config{PublicURL: "http://console.test"}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	refused := &problem.Error{Code: problem.RateLimited, RetryAfter: 5, Message: "The company's files have 32 downloads under way, the most at once; retry in 5 seconds."}
	w := httptest.NewRecorder()
	c.fail(w, httptest.NewRequest(http.MethodGet, Prefix+"/media/med_1", nil), nil, refused)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("the error page: %d, Retry-After %q; want 429 with Retry-After: 5", w.Code, w.Header().Get("Retry-After"))
	}
	r := httptest.NewRequest(http.MethodPost, Prefix+"/settings/company", nil)
	r.Header.Set("Accept", "application/json")
	w = httptest.NewRecorder()
	c.answerErr(w, r, member, nil, Prefix+"/settings", refused)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("the JSON answer: %d, Retry-After %q; want 429 with Retry-After: 5", w.Code, w.Header().Get("Retry-After"))
	}
}
