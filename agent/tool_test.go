package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
)

// fakeTool writes an executable shell script named name on PATH. Each
// background child it starts writes its pid to a file of the test's, and
// is killed at the test's end.
func fakeTool(t *testing.T, name, body string) {
	t.Helper()
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script := "#!/bin/sh\nPIDS=" + pids + "\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Cleanup(func() {
		data, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// A tool killed at its deadline whose own child still holds its output
// open (termux-api leaves am broadcast running) is given up all the same:
// Run returns, and the executor is not held by it for good.
func TestToolPastItsDeadlineReturnsDespiteItsChild(t *testing.T) {
	fakeTool(t, "fake-send", `sleep 600 & echo $! >> "$PIDS"
exec sleep 600`)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Tool{Name: "fake-send"}.Run(ctx, "")
		done <- err
	}()
	var err error
	poll.Within(t, toolWaitDelay+poll.Timeout, "Run returns after the deadline", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if err == nil {
		t.Fatal("a tool killed at its deadline returned no error")
	}
}

// A tool that succeeded and left a child holding its output open is a
// success: its answer is what it printed (the SMS went out; a failed
// report would invite a second send). The tool's wait for its child is
// cut short (the product's is toolWaitDelay): the wait ends the same way,
// in ErrWaitDelay.
func TestToolThatSucceededLeavingAChildIsASuccess(t *testing.T) {
	fakeTool(t, "fake-send", `sleep 600 & echo $! >> "$PIDS"
echo sent`)
	const waitDelay = 200 * time.Millisecond
	done := make(chan struct{})
	var out string
	var err error
	go func() {
		out, err = Tool{Name: "fake-send", WaitDelay: waitDelay}.Run(context.Background(), "")
		close(done)
	}()
	poll.Within(t, waitDelay+poll.Timeout, "Run returns", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if err != nil || strings.TrimSpace(out) != "sent" {
		t.Fatalf("Run: %q, %v; want sent, no error", out, err)
	}
}
