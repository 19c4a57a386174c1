package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/problem"
)

// TestRefuseUnstorableParsesTheQueryOnce: the check of a request's query
// parses it through Echo's QueryParams, which keeps the map for the
// handler, so a sound request costs the handler's own parse and nothing
// more: no second parse of the query, and nothing at all without one. A
// faulty query is still refused (TestNULInPathsAndQueries and
// TestNotUTF8InPathsQueriesAndKeys check each route).
func TestRefuseUnstorableParsesTheQueryOnce(t *testing.T) {
	e := echo.New()
	handler := func(c echo.Context) error {
		_ = c.QueryParam("device_fingerprint")
		return nil
	}
	checked := refuseUnstorable(handler)
	for _, target := range []string{
		"/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567&limit=50&page=2",
		"/chat/devices",
	} {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		c := e.NewContext(req, httptest.NewRecorder())
		run := func(h echo.HandlerFunc) func() {
			return func() {
				c.Reset(req, httptest.NewRecorder())
				if err := h(c); err != nil {
					t.Fatal(err)
				}
			}
		}
		alone := testing.AllocsPerRun(200, run(handler))
		if with := testing.AllocsPerRun(200, run(checked)); with > alone {
			t.Errorf("%s: the handler alone allocates %.0f times, with the check %.0f: the check parses the query again", target, alone, with)
		}
	}
	// The check still refuses what it refused.
	for target, field := range map[string]string{"/chat/messages?phone=%2B1555%00": "phone", "/chat/messages?a=1&phone=%FF": "phone"} {
		c := e.NewContext(httptest.NewRequest(http.MethodGet, target, nil), httptest.NewRecorder())
		var pe *problem.Error
		if err := checked(c); !errors.As(err, &pe) || pe.Status() != http.StatusBadRequest || pe.Field != field {
			t.Errorf("%s: %v, want a 400 naming %s", target, err, field)
		}
	}
}
