package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's profiles on their own listener, apart from the API,
// so that they are never exposed with it, and says where on stdout (a port
// of 0 is chosen by the system: the bench reads the line). It returns the
// function that stops it.
func servePprof(addr string, stdout io.Writer, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	// No /debug/pprof/cmdline: the command line may carry secrets (--admin-token, --smtp-url's password).
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("pprof profiles served", "addr", ln.Addr().String())
	fmt.Fprintf(stdout, "simrelay %s pprof profiles on http://%s/debug/pprof/\n", buildVersion(), ln.Addr())
	return func() { _ = srv.Close() }, nil
}
