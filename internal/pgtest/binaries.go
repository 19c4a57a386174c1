//go:build unix

package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// MinMajor is the oldest PostgreSQL the product supports (contract section 12).
const MinMajor = 15

// debianBinaries is where Debian's postgresql-NN packages put their
// binaries, outside PATH.
const debianBinaries = "/usr/lib/postgresql/*/bin"

// installHint ends every "not found" failure: what to run to get PostgreSQL.
const installHint = "run `make test`, which installs Debian's postgresql when it is missing, or install it yourself (`apt-get install postgresql`; on macOS `brew install postgresql@16`) and put its bin directory in PATH"

// errNotFound says PostgreSQL's server binaries are nowhere to be found.
var errNotFound = errors.New("pgtest: PostgreSQL not found (no initdb and postgres in PATH or " + debianBinaries + "): " + installHint)

// binDir finds the directory that holds initdb and postgres: first through
// path (PATH's value), then in the newest version matching pattern
// (debianBinaries). initdb's symlinks are followed, so a PATH entry that
// links to a Debian install finds postgres beside the real initdb.
func binDir(path, pattern string) (string, error) {
	if initdb, err := lookIn(path, "initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			initdb = real
		}
		dir := filepath.Dir(initdb)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(pattern)
	// Newest version first: /usr/lib/postgresql/17/bin before .../15/bin.
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errNotFound
}

// lookIn is exec.LookPath over the given PATH value rather than the process's.
func lookIn(path, name string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

var majorInPath = regexp.MustCompile(`/(\d+)/bin$`)

// versionOf reads the major version in a .../NN/bin path, 0 when none.
func versionOf(dir string) int {
	m := majorInPath.FindStringSubmatch(filepath.ToSlash(dir))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var majorInVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// checkVersion runs `postgres --version` and refuses one older than MinMajor.
func checkVersion(dir string) error {
	out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return fmt.Errorf("pgtest: %s --version: %v", filepath.Join(dir, "postgres"), err)
	}
	m := majorInVersion.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("pgtest: %s --version said %q, not a PostgreSQL version", filepath.Join(dir, "postgres"), out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < MinMajor {
		return fmt.Errorf("pgtest: %s is PostgreSQL %d; simrelay needs %d or later: %s", dir, n, MinMajor, installHint)
	}
	return nil
}
