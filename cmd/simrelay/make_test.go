package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// makeDry is what make would run for args in the repository's root (make
// -n: the commands printed with the Makefile's variables expanded, none
// run), one logical line each: the tests of the Makefile look at what it
// does, not at how its text spells it. make runs with PATH and HOME alone,
// so that no variable of the caller's (GOFLAGS, TEST_TIMEOUT) overrides the
// Makefile's.
func makeDry(t *testing.T, args ...string) []string {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make: %v", err)
	}
	cmd := exec.Command(mk, append([]string{"-n", "--no-print-directory", "-C", "../.."}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Split(strings.ReplaceAll(strings.TrimSpace(string(out)), "\\\n", ""), "\n")
}

// goRuns are the lines of lines that run go with one of the commands
// (test, build), in their order.
func goRuns(lines []string, commands ...string) []string {
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "go" && slices.Contains(commands, f[i+1]) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// goArgs is what follows "go <command>" in line.
func goArgs(line, command string) []string {
	_, after, _ := strings.Cut(line, " go "+command+" ")
	return strings.Fields(after)
}

// makeTestPasses are make test's two go test runs, the first pass (every
// package under -race) and the second (the server's suites on
// PostgreSQL), as make would run them with the variables set in vars.
func makeTestPasses(t *testing.T, vars ...string) (first, second string) {
	t.Helper()
	runs := goRuns(makeDry(t, append([]string{"test"}, vars...)...), "test")
	if len(runs) != 2 {
		t.Fatalf("make test runs go test %d times, want 2 (the two passes):\n%s", len(runs), strings.Join(runs, "\n"))
	}
	return runs[0], runs[1]
}

// pgSuites are the packages make test's second pass runs on PostgreSQL.
func pgSuites(t *testing.T) []string {
	t.Helper()
	_, second := makeTestPasses(t)
	var pkgs []string
	for _, a := range goArgs(second, "test") {
		if strings.HasPrefix(a, "./") {
			pkgs = append(pkgs, a)
		}
	}
	if len(pkgs) == 0 {
		t.Fatalf("make test's second pass names no package: %s", second)
	}
	return pkgs
}

// make test hands the headless Chromium it installs (CHROMIUM_SHELL, the
// one place that names it) to both passes' tests, which start that one:
// set on make's command line, the install's check and the tests agree.
func TestMakeTestHandsTheChromiumPathToTheTests(t *testing.T) {
	t.Parallel()
	const shell = "/opt/chromium-test/headless-shell"
	first, second := makeTestPasses(t, "CHROMIUM_SHELL="+shell)
	for _, pass := range []string{first, second} {
		if !strings.Contains(pass, " SIMRELAY_TEST_CHROMIUM="+shell+" ") {
			t.Errorf("with CHROMIUM_SHELL=%s, make test runs\n%s\nwant SIMRELAY_TEST_CHROMIUM=%s", shell, pass, shell)
		}
	}
	if lines := makeDry(t, "chromium", "CHROMIUM_SHELL="+shell); !slices.Contains(lines, "test -x "+shell) {
		t.Errorf("with CHROMIUM_SHELL=%s, make chromium runs\n%s\nwant it to check that path", shell, strings.Join(lines, "\n"))
	}
}
