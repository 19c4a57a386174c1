package httpapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/problem"
)

//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if s.draining.Load() {
		return problem.New(problem.Unavailable, "The server is shutting down.")
	}
	if err := s.deps.Store.Ready(); err != nil {
		s.readinessLost("store", err)
		return problem.New(problem.Unavailable, "The store is not ready.")
	}
	if s.deps.Bus != nil {
		if err := s.deps.Bus.Ready(c.Request().Context()); err != nil {
			s.readinessLost("bus", err)
			return problem.New(problem.Unavailable, "The bus between the nodes is not ready.")
		}
	}
	s.readinessOK()
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) metricsPage(c echo.Context) error {
	promhttp.HandlerFor(s.deps.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
}

func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", s.openAPI)
}

// servedOpenAPI is the document with publicURL as its one server, so that
// a client generated from the served document, or a page that tries its
// operations, calls the server it came from; the embedded document as it
// is when publicURL is empty.
//
// The document is parsed and written once per process (openAPIServed), as
// it is the same but for its servers: each server of a process (every
// test's, some hundreds in a package) only joins the two parts around its
// own. Parsed for each, its 450 KB were 7.5 % of the CPU time of
// httpapi's tests under the race detector.
func servedOpenAPI(publicURL string) ([]byte, error) {
	if publicURL == "" {
		return openAPIDoc, nil
	}
	parts, err := openAPIServed()
	if err != nil {
		return nil, err
	}
	servers, err := json.Marshal([]map[string]string{{"url": strings.TrimSuffix(publicURL, "/"), "description": "This server (its `--public-url`)."}})
	if err != nil {
		return nil, err
	}
	doc := make([]byte, 0, len(parts.head)+len(servers)+len(parts.tail))
	return append(append(append(doc, parts.head...), servers...), parts.tail...), nil
}

// serversMark stands for the servers while the document is written once:
// a JSON string no document of ours holds (openAPIServed checks).
const serversMark = `"\u0000servers\u0000"`

// openAPIServed answers the embedded document, as json.Marshal writes it
// (compact, its keys in order), in the two parts before and after the
// value of its servers.
var openAPIServed = sync.OnceValues(func() (openAPIParts, error) {
	var parts openAPIParts
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		return parts, fmt.Errorf("httpapi: openapi.json: %w", err)
	}
	doc["servers"] = json.RawMessage(serversMark)
	b, err := json.Marshal(doc)
	if err != nil {
		return parts, err
	}
	if bytes.Count(b, []byte(serversMark)) != 1 {
		return parts, fmt.Errorf("httpapi: openapi.json holds %s", serversMark)
	}
	i := bytes.Index(b, []byte(serversMark))
	parts.head, parts.tail = b[:i], b[i+len(serversMark):]
	return parts, nil
})

type openAPIParts struct{ head, tail []byte }

func (s *Server) console(c echo.Context) error {
	// The console's sign-in counts its failed logins by client as the
	// API's does (account.WithClient).
	r := c.Request()
	s.deps.Console.ServeHTTP(c.Response(), r.WithContext(account.WithClient(r.Context(), c.RealIP())))
	return nil
}
