// Package pgtest gives tests a real PostgreSQL: one cluster per test binary,
// started on first use in a temporary directory (in /dev/shm, memory, where
// there is one with room), listening only on a unix socket there (no TCP), with fsync
// off and small buffers; each test gets a
// fresh database of its own, dropped when the test ends. initdb runs once
// for all the test binaries of a machine: its result is kept beside the
// clusters' directories and each cluster starts from a copy (initdb.go). A database copied
// from a prepared template (URLFrom) is instead made new again when its test
// ends, if nothing but rows and sequences changed in it, and handed to the
// next test of the same template: copying a template costs a fifth of a
// second of CPU, resetting one a few milliseconds (reuse.go says when a copy
// is dropped rather than reused).
//
// A package whose tests use it calls Main from TestMain, which stops the
// cluster and removes its directory when the tests are done:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.URL(t) // postgres:///t_1?host=/tmp/simrelay-pgtest-...
//	}
//
// The binaries (initdb, postgres, 15 or later) are found in PATH or in
// /usr/lib/postgresql/*/bin (Debian's layout; `make test` installs Debian's
// postgresql when neither has them). Without them a test fails, never skips,
// and says how to install them.
//
// initdb and postgres refuse to run as root, so when the tests run as root
// the cluster runs as the user nobody, in a directory handed to it; as any
// other user it runs as that user. A test binary killed before it could stop
// its cluster (a timeout, kill -9) takes the server down with it on Linux (the
// server gets SIGQUIT when its parent dies), and the next run removes the
// directory it left behind.
//
// The harness runs on Unix systems (Linux, macOS); elsewhere the package is empty.
package pgtest
