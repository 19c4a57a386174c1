// Package testbin finds the simrelay binaries that make test built once for
// the whole run, for the tests that start simrelay or simrelay-agent as
// child processes. Without make test (go test ./cmd/simrelay alone) such a
// test builds its own, as it always did.
package testbin

import (
	"fmt"
	"os"
	"path/filepath"
)

// Env names the environment variable make test sets to the absolute path
// of a directory holding simrelay and simrelay-agent, each built from this
// tree (go build, without -race, as the tests' own builds are). Linking the
// server costs a core several seconds on the 2-core test machine, and three
// test binaries each linked their own, in both passes.
const Env = "SIMRELAY_TEST_BIN"

// Tag is the build tag of the binaries the tests run (make test's
// test-binaries, and a test's own go build without them): with it a
// binary hashes passwords at the tests' cost (account.TestCostBuild), as
// the tests that run the server in their own process set it, instead of
// the production cost that made the admin create-company and the logins
// of the tests that run simrelay a dozen seconds of a core in make test.
// make build and make agents never set it.
const Tag = "simrelay_testcost"

// BuildFlags are the go build flags of a test's own build of a binary
// (Tag), before its other flags: a new slice each call, which the caller
// may append to or change without changing another test's build.
func BuildFlags() []string { return []string{"-tags", Tag} }

// Prebuilt answers the path of the binary name ("simrelay",
// "simrelay-agent") in Env's directory, and whether Env is set: when it is
// not, the caller builds the binary itself. Env set to a directory that
// lacks it is an error, not a reason to build another.
func Prebuilt(name string) (path string, ok bool, err error) {
	dir := os.Getenv(Env)
	if dir == "" {
		return "", false, nil
	}
	if !filepath.IsAbs(dir) {
		return "", true, fmt.Errorf("%s=%s: want an absolute path (a test runs in its package's directory)", Env, dir)
	}
	path = filepath.Join(dir, name)
	fi, err := os.Stat(path)
	if err != nil {
		return "", true, fmt.Errorf("%s=%s has no %s (make test builds it there): %w", Env, dir, name, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", true, fmt.Errorf("%s=%s: %s is not an executable file", Env, dir, name)
	}
	return path, true, nil
}
