package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRefuseUnstorableParsesTheQueryOnce: the console's check of an
// address parses its query once and keeps it for the page (query), as the
// API's check keeps it through Echo's QueryParams, so a sound request
// costs the page's own parse and nothing more: no second parse of the
// query, and nothing at all without one. A faulty query is still refused
// (TestConsolePagesRefuseNULAsPages, TestConsolePagesRefuseRepeatedParameters).
func TestRefuseUnstorableParsesTheQueryOnce(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := query(r)
		_, _ = q.Get("device"), q.Get("phone")
	})
	checked := (&Console{}).refuseUnstorable(page)
	for _, target := range []string{
		"/console/messages?device=a-phone&phone=%2B15551234567&sig=abc",
		"/console/messages?device=a-phone&device=a-phone",
		"/console/devices",
	} {
		run := func(h http.Handler) func() {
			return func() {
				req := httptest.NewRequest(http.MethodGet, target, nil)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		}
		alone := testing.AllocsPerRun(200, run(page))
		if with := testing.AllocsPerRun(200, run(checked)); with > alone {
			t.Errorf("%s: the page alone allocates %.0f times, with the check %.0f: the query is parsed again", target, alone, with)
		}
	}
	// A form post's Form is its ParseForm's, body fields and all.
	req := httptest.NewRequest(http.MethodPost, "/console/messages/send?device=a", nil)
	checked.ServeHTTP(httptest.NewRecorder(), req)
	if req.Form != nil {
		t.Errorf("a form post's Form was set before its ParseForm: %v", req.Form)
	}
}
