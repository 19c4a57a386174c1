package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
)

// benchRun is `simrelay bench` running in a directory of its own (its
// TMPDIR too, so its temporary store is the test's), its output kept.
type benchRun struct {
	cmd            *exec.Cmd
	dir            string
	mu             sync.Mutex
	stdout, stderr strings.Builder
}

func (b *benchRun) Write(p []byte) (int, error) { // stderr
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.Write(p)
}

type stdoutOf struct{ b *benchRun }

func (s stdoutOf) Write(p []byte) (int, error) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.b.stdout.Write(p)
}

func (b *benchRun) output() (stdout, stderr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stdout.String(), b.stderr.String()
}

// startBench starts the bench at a tiny size whose throughput phase lasts
// a minute, and waits until that phase is under way.
func startBench(t *testing.T) *benchRun {
	t.Helper()
	bin := buildBinary(t)
	b := &benchRun{dir: t.TempDir()}
	b.cmd = exec.Command(bin, "bench", "--phones", "4", "--messages", "50", "--queries", "5", "--send-for", "60s",
		"--senders", "2", "--rate", "20", "--rate-for", "500ms", "--inbound-rate", "10", "--inbound-for", "500ms",
		"--bulk-requests", "0", "--drain-jobs", "0", "--pool-for", "0s", "--restart-after", "0s", "--json", filepath.Join(b.dir, "bench.json"))
	b.cmd.Dir = b.dir
	b.cmd.Env = append(os.Environ(), "TMPDIR="+b.dir)
	b.cmd.Stdout, b.cmd.Stderr = stdoutOf{b}, b
	b.cmd.WaitDelay = 5 * time.Second // a server left running holds its output
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			_ = b.cmd.Process.Kill()
			_ = b.cmd.Wait()
		}
	})
	poll.Within(t, 60*time.Second, "the throughput phase under way", func() bool {
		_, stderr := b.output()
		return strings.Contains(stderr, "sending as fast as")
	})
	return b
}

// serverPid is the pid of the bench's server, its one child process (each
// thread lists the children it started).
func (b *benchRun) serverPid(t *testing.T) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(b.cmd.Process.Pid) + "/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that has ended
		}
		fields = append(fields, strings.Fields(string(raw))...)
	}
	if len(fields) != 1 {
		t.Fatalf("the bench has children %q, want its one server", fields)
	}
	child, err := strconv.Atoi(fields[0])
	if err != nil {
		t.Fatal(err)
	}
	return child
}

// running says whether the process pid runs still (a zombie has ended).
func running(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces, the state follows its ")".
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// Ctrl-C stops the bench at once, with the figures of the phases it ended:
// it prints them, writes them with the phase it cut ("interrupted"), says
// so and exits 1; its server is stopped and its temporary store removed. The
// bench killed its server with the signal and ran every phase left against
// the dead port (the throughput phase to its end, a minute here), then
// printed them as measured, 0.00 ms latencies under their targets, and
// exited 0.
func TestBenchStopsAtCtrlCWithThePhasesItEnded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	b := startBench(t)
	server := b.serverPid(t)
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the bench runs on 30 s after Ctrl-C")
	}
	stdout, stderr := b.output()
	if code := b.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "simrelay bench: stopped by a signal during the durable sends phase") {
		t.Errorf("stderr does not say where the run was stopped:\n%s", stderr)
	}
	if !strings.Contains(stdout, "RSS per idle phone (4 phones)") || !strings.Contains(stdout, "4 phones online from none") {
		t.Errorf("the figures of the phases before the stop are not printed:\n%s", stdout)
	}
	for _, row := range []string{"durable sends, answered", "send -> frame on phone", "inbound -> webhook", "history page", "dashboard summary"} {
		if strings.Contains(stdout, row) {
			t.Errorf("a phase not measured is printed (%q):\n%s", row, stdout)
		}
	}
	raw, err := os.ReadFile(filepath.Join(b.dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Interrupted string  `json:"interrupted"`
		Sends       float64 `json:"durable_sends_per_second"`
		Phones      int     `json:"phones"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Interrupted != "durable sends" || rep.Sends != 0 || rep.Phones != 4 {
		t.Errorf("the JSON: %s; want interrupted \"durable sends\", no send rate, 4 phones", raw)
	}
	if running(server) {
		t.Errorf("the bench's server (pid %d) runs on", server)
	}
	if left, _ := filepath.Glob(filepath.Join(b.dir, "simrelay-bench-*")); len(left) > 0 {
		t.Errorf("the temporary store is left behind: %v", left)
	}
}

// A bench that dies without stopping its server (killed, out of memory)
// takes the server with it: the server ran on for good, holding its port,
// its phones and its temporary store.
func TestBenchServerEndsWithTheBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	b := startBench(t)
	server := b.serverPid(t)
	t.Cleanup(func() {
		if running(server) {
			_ = syscall.Kill(server, syscall.SIGKILL)
		}
	})
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.cmd.Wait()
	poll.Within(t, 10*time.Second, "the server ended with the bench", func() bool { return !running(server) })
}
