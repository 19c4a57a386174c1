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
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if set || perCPU < 1 {
		return
	}
	_ = flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
}
