package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Addr names loopback ports below the ephemeral range, free when named and
// different from one call to the next.
func TestAddr(t *testing.T) {
	low := ephemeralLow()
	seen := map[string]bool{}
	for range 50 {
		addr := Addr(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		if host != "127.0.0.1" || n < low-span || n >= low {
			t.Fatalf("Addr = %s; want 127.0.0.1 and a port in [%d, %d)", addr, low-span, low)
		}
		if seen[addr] {
			t.Fatalf("Addr named %s twice in 50 calls", addr)
		}
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the address Addr named is not free: %v", err)
		}
		l.Close()
	}
}

// A port someone listens on is skipped.
func TestAddrSkipsATakenPort(t *testing.T) {
	before := next.Load()
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ephemeralLow()-span+int((before+1)%span)))
	if err != nil {
		t.Skipf("the port Addr tries next is taken already: %v", err)
	}
	defer l.Close()
	if addr := Addr(t); addr == l.Addr().String() {
		t.Fatalf("Addr named %s, where a listener is", addr)
	}
}
