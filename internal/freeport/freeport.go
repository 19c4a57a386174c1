// Package freeport is for tests that must name a loopback address before
// anything listens there: a server started later, or restarted after a
// kill, where its clients reconnect.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// span is how many ports below the kernel's ephemeral range Addr walks.
const span = 10000

// next walks the ports Addr tries, from a random start so that two test
// processes (go test runs packages side by side) rarely try the same ones.
var next = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(rand.Int64N(1 << 30))
	return &n
}()

// Addr is a loopback address ("127.0.0.1:port") that no one listens on at
// the time of the call. The port lies below the kernel's ephemeral range: a
// port the kernel hands out, to a listener on :0 or to an outgoing
// connection of a parallel test, could be taken between this call and the
// server's start, or between a kill and a restart; one below the range is
// only taken by a caller that names it.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Free is Addr for a caller without a test, such as a server shared by a
// test binary's tests: it answers the error Addr fails the test with.
func Free() (string, error) {
	low := ephemeralLow()
	for range span {
		port := low - span + int(next.Add(1)%span)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port in [%d, %d)", low-span, low)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default where it cannot be read).
func ephemeralLow() int {
	low := 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > span+1024 {
				low = n
			}
		}
	}
	return low
}
