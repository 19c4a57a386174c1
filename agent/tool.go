package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Tool is an external program a transport runs (termux-sms-send, mmcli).
// It is always run directly with an argument list, never through a shell,
// so nothing in a phone number or a text can become a command.
type Tool struct {
	// Name is the program, looked up in PATH.
	Name string
	// Install says how to get it, for the error when it is missing.
	Install string
	// Grant says which permission it needs, for the error when it is refused.
	Grant string
}

// ToolError is a tool that could not be run or refused to work. Kind is
// "missing", "permission" or "failed".
type ToolError struct {
	Tool   string
	Kind   string
	Hint   string
	Output string
	Err    error
}

func (e *ToolError) Error() string {
	switch e.Kind {
	case "missing":
		return fmt.Sprintf("%s is not installed (not found in PATH): %s", e.Tool, e.Hint)
	case "permission":
		return fmt.Sprintf("%s was refused a permission: %s (%s)", e.Tool, e.Hint, firstLine(e.Output, e.Err))
	}
	return fmt.Sprintf("%s failed: %s", e.Tool, firstLine(e.Output, e.Err))
}

func (e *ToolError) Unwrap() error { return e.Err }

func firstLine(out string, err error) string {
	out = strings.TrimSpace(out)
	if i := strings.IndexByte(out, '\n'); i >= 0 {
		out = out[:i]
	}
	if len(out) > 200 {
		out = out[:200]
	}
	switch {
	case out != "" && err != nil:
		return out + ": " + err.Error()
	case out != "":
		return out
	case err != nil:
		return err.Error()
	}
	return "no output"
}

// Check reports a clear error when the tool is not in PATH or not executable.
func (t Tool) Check() error {
	_, err := exec.LookPath(t.Name)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return &ToolError{Tool: t.Name, Kind: "permission", Hint: "make it executable for this user", Err: err}
	}
	return &ToolError{Tool: t.Name, Kind: "missing", Hint: t.Install, Err: err}
}

// toolWaitDelay is how long Run waits for a tool's output to close once
// the tool ended or was killed.
const toolWaitDelay = 5 * time.Second

// Run runs the tool with args, stdin as its standard input, and returns its
// standard output. A missing tool, a permission refusal (exit status 126, or
// an output that says "permission") and any other failure come back as a
// *ToolError that names the tool and what to do.
func (t Tool) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, t.Name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A child the tool started may hold its output open after the tool
	// ended or was killed at ctx's deadline (termux-api leaves am
	// broadcast running): without a bound, Run would wait for that child,
	// and a hung one would hold the executor for good.
	cmd.WaitDelay = toolWaitDelay
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		err = nil // the tool itself succeeded; its child's output is not its answer
	}
	out := stdout.String()
	both := out + stderr.String()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return out, &ToolError{Tool: t.Name, Kind: "missing", Hint: t.Install, Err: err}
		}
		var ee *exec.ExitError
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EACCES) ||
			(errors.As(err, &ee) && ee.ExitCode() == 126) || mentionsPermission(both) {
			return out, &ToolError{Tool: t.Name, Kind: "permission", Hint: t.Grant, Output: both, Err: err}
		}
		return out, &ToolError{Tool: t.Name, Kind: "failed", Output: stderr.String(), Err: err}
	}
	if mentionsPermission(both) {
		// Termux:API answers a missing Android permission with a message
		// and exit status 0.
		return out, &ToolError{Tool: t.Name, Kind: "permission", Hint: t.Grant, Output: both}
	}
	return out, nil
}

func mentionsPermission(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "permission denied") || strings.Contains(s, "grant the following permission") ||
		strings.Contains(s, "not authorized") || strings.Contains(s, "missing permission")
}
