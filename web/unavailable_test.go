package web

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A store that cannot take a request (its disk full, its database out of
// reach) is answered 503 unavailable in the API's words, and logged as the
// API logs it: one line per 10 s for each, with the count left out. The
// console answered a 500 "Something went wrong" and logged an ERROR a
// request before.
func TestStoreRefusalsAre503(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	c := &Console{deps: Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return now }}}
	r := httptest.NewRequest(http.MethodPost, Prefix+"/settings/company", nil)
	refuse := func() {
		t.Helper()
		for _, tc := range []struct {
			err  error
			want string
		}{
			{fmt.Errorf("store: update company 1: %w: could not extend file", store.ErrDiskFull), "disk is full"},
			{fmt.Errorf("store: company 1: %w: connection refused", store.ErrUnavailable), "cannot reach its database"},
		} {
			pe := c.toProblem(r, tc.err)
			if pe.Status() != http.StatusServiceUnavailable || pe.Code != problem.Unavailable || !strings.Contains(pe.Message, tc.want) {
				t.Fatalf("%v: got %d %s %q, want 503 unavailable saying %q", tc.err, pe.Status(), pe.Code, pe.Message, tc.want)
			}
		}
	}
	lines := func(of string) []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, of) {
				out = append(out, l)
			}
		}
		return out
	}
	for range 3 {
		refuse()
	}
	if n := len(lines("console request failed")); n != 0 {
		t.Fatalf("%d lines of failed requests, want none:\n%s", n, logs.String())
	}
	if full, gone := lines("store disk full: writes refused"), lines("store unavailable"); len(full) != 1 || len(gone) != 1 || !strings.Contains(full[0], "level=ERROR") {
		t.Fatalf("after 3 of each within 10 s: %d and %d lines, want one ERROR each:\n%s", len(full), len(gone), logs.String())
	}
	now = now.Add(outage.LogEvery)
	refuse()
	if full := lines("store disk full: writes refused"); len(full) != 2 || !strings.Contains(full[1], "suppressed=2") {
		t.Fatalf("10 s on: %q, want a second line with suppressed=2", full)
	}
}
