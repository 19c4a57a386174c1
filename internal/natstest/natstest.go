// Package natstest runs a NATS server inside a test process, on loopback
// and a free port, for the cluster's tests.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a NATS server on 127.0.0.1 for the test and returns its URL;
// it stops when the test ends.
func Start(t testing.TB) string {
	t.Helper()
	s := New(t)
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// New starts a NATS server on 127.0.0.1 that the caller shuts down (to see
// what a node does when its bus goes away).
func New(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats server: not ready within 10s")
	}
	return s
}
