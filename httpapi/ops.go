package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

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
func servedOpenAPI(publicURL string) ([]byte, error) {
	if publicURL == "" {
		return openAPIDoc, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		return nil, fmt.Errorf("httpapi: openapi.json: %w", err)
	}
	servers, err := json.Marshal([]map[string]string{{"url": strings.TrimSuffix(publicURL, "/"), "description": "This server (its `--public-url`)."}})
	if err != nil {
		return nil, err
	}
	doc["servers"] = servers
	return json.Marshal(doc)
}

func (s *Server) console(c echo.Context) error {
	// The console's sign-in counts its failed logins by client as the
	// API's does (account.WithClient).
	r := c.Request()
	s.deps.Console.ServeHTTP(c.Response(), r.WithContext(account.WithClient(r.Context(), c.RealIP())))
	return nil
}
