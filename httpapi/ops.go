package httpapi

import (
	_ "embed"
	"fmt"
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
		s.deps.Logger.Error("readiness check failed", "err", err)
		return problem.New(problem.Unavailable, "The store is not ready.")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) metricsPage(c echo.Context) error {
	promhttp.HandlerFor(s.deps.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
}

func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openAPIDoc)
}

// backup streams a consistent copy of the store, taken in one read transaction
// while the server keeps running.
func (s *Server) backup(c echo.Context) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="simrelay-%s.db"`, s.deps.Now().UTC().Format("20060102-150405")))
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	n, err := s.deps.Store.Backup(c.Response())
	if err != nil {
		// The status is gone already; the short body tells the client, the log tells the operator.
		s.deps.Logger.Error("backup failed", "bytes", n, "err", err)
		return nil
	}
	s.deps.Logger.Info("backup streamed", "bytes", n, "company_id", principal(c).CompanyID)
	return nil
}

func (s *Server) console(c echo.Context) error {
	s.deps.Console.ServeHTTP(c.Response(), c.Request())
	return nil
}
