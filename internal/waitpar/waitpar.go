// Package waitpar is for the TestMain of a package whose parallel tests
// spend most of their time waiting, not computing: on servers they run as
// child processes, on a WebSocket close handshake with a phone that does
// not read, on a timeout a test reaches on purpose. go test runs at most
// GOMAXPROCS of a package's parallel tests at once (-parallel), which on a
// two-core machine leaves the cores idle while two such tests wait; such a
// package runs more of them at once.
package waitpar

import (
	"flag"
	"runtime"
	"strconv"
)

// Default sets -test.parallel to perCPU x GOMAXPROCS, unless the command
// line set it (go test -parallel N stays the user's choice). Call it from
// TestMain before m.Run; it parses the command line.
func Default(perCPU int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if explicit() || perCPU < 1 {
		return
	}
	_ = flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
}

// AtLeast sets -test.parallel to n where GOMAXPROCS is lower, unless the
// command line set it: for tests that each hold resources of a shared
// server (a PostgreSQL cluster's connections, which Default's share per
// core would exhaust on a machine with many cores), so that a machine
// with few cores still overlaps their waits and one with many runs as
// many as it has cores.
func AtLeast(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if explicit() || runtime.GOMAXPROCS(0) >= n {
		return
	}
	_ = flag.Set("test.parallel", strconv.Itoa(n))
}

// explicit says whether the command line set -test.parallel.
func explicit() bool {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	return set
}
