package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	return c.Blob(http.StatusOK, "application/json", openAPIDoc)
}

func (s *Server) console(c echo.Context) error {
	s.deps.Console.ServeHTTP(c.Response(), c.Request())
	return nil
}
