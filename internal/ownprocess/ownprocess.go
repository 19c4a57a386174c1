// Package ownprocess runs a test in a process of its own, for a test that
// changes what belongs to the whole process (a resource limit such as the
// largest file it may write): nothing else of the test binary runs under
// the change, neither the package's other tests nor go test's own record
// of the files the binary opens, which a lowered file size limit made fail.
package ownprocess

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// env names the test a process was started to run.
const env = "SIMRELAY_OWN_PROCESS_TEST"

// Run reports whether this process is the test's own, where the test goes
// on with its body. Otherwise it runs the test (a top-level one) in a new
// process of the test binary, fails t with that process's output if it
// failed, skips t if it skipped, and returns false: the caller returns.
func Run(t *testing.T) bool {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("ownprocess.Run in subtest %s: only a top-level test runs in a process of its own", t.Name())
	}
	if os.Getenv(env) == t.Name() {
		return true
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	if d, ok := t.Deadline(); ok {
		// At least a second: a timeout of 0s would be none at all.
		args = append(args, "-test.timeout="+max(time.Until(d).Round(time.Second), time.Second).String())
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("%s in a process of its own: %v\n%s", t.Name(), err, out)
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skipf("%s in a process of its own skipped:\n%s", t.Name(), out)
	case !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")):
		t.Fatalf("%s in a process of its own did not run it:\n%s", t.Name(), out)
	}
	return false
}
