package stripemock

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes this test binary, run again by
// TestStripeMockEndsWithItsTestBinary, the test binary to kill.
const childEnv = "STRIPEMOCK_TEST_CHILD"

// TestStripeMockEndsWithItsTestBinary: a test binary that ends without
// returning to Run (go test's -timeout, a kill) takes its stripe-mock
// with it; it ran on, listening, before.
func TestStripeMockEndsWithItsTestBinary(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child runs TestChildStartsStripeMock only")
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestChildStartsStripeMock$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	pid := 0
	lines := bufio.NewScanner(out)
	for pid == 0 && lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "stripe-mock pid "); ok {
			if pid, err = strconv.Atoi(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pid == 0 {
		t.Fatalf("the child test binary named no stripe-mock: %v", lines.Err())
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // a stripe-mock left running
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock (pid %d) still runs 10 s after its test binary was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChildStartsStripeMock is the child's part: it starts stripe-mock,
// names its process and waits to be killed.
func TestChildStartsStripeMock(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestStripeMockEndsWithItsTestBinary")
	}
	Start(t)
	os.Stdout.WriteString("stripe-mock pid " + strconv.Itoa(shared.cmd.Process.Pid) + "\n")
	select {}
}

// running reports whether pid is a live process: not gone, nor a zombie
// that nobody has reaped yet.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
