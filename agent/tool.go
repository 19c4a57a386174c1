package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Bounds of one tool call. The output of every tool the agent runs is
// small (termux-sms-list's page of 50 messages, mmcli's JSON): a tool that
// prints more than maxToolOutput is broken or hostile, and is stopped.
// toolWaitDelay is how long the agent waits, once the tool exited or was
// killed, for what it left running to let go of its output (Tool.WaitDelay).
const (
	maxToolOutput = 4 << 20
	maxToolStderr = 64 << 10
	toolWaitDelay = 5 * time.Second
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
	// Timeout bounds one call, whatever ctx allows (DefaultToolTimeout when
	// zero). A tool that sends keeps the default: the core tells a send cut
	// off by its own deadline (outcome unknown) from a failed one.
	Timeout time.Duration
	// WaitDelay bounds the wait, once the tool exited or was killed, for
	// what it left running to let go of its output (toolWaitDelay when
	// zero).
	WaitDelay time.Duration
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

// Run runs the tool with args, stdin as its standard input, and returns its
// standard output. A missing tool, a permission refusal (exit status 126, or
// an output that says "permission") and any other failure come back as a
// *ToolError that names the tool and what to do. The call is bounded: past
// Timeout, or when ctx ends, or once its output passes maxToolOutput, the
// tool is killed with every process it started (its process group), so a
// helper it left waiting cannot hold the agent.
func (t Tool) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultToolTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Name, args...)
	killGroup(cmd)
	cmd.WaitDelay = t.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = toolWaitDelay
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	stdout := &capped{max: maxToolOutput, full: cancel}
	stderr := &capped{max: maxToolStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		// The tool exited with status 0; something it started kept its
		// output open and was cut off: its output is not the tool's answer.
		err = nil
	}
	out := stdout.String()
	both := out + stderr.String()
	if stdout.over {
		return "", &ToolError{Tool: t.Name, Kind: "failed", Err: fmt.Errorf("printed more than %d bytes", maxToolOutput)}
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return out, &ToolError{Tool: t.Name, Kind: "missing", Hint: t.Install, Err: err}
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		var ee *exec.ExitError
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EACCES) ||
			(errors.As(err, &ee) && ee.ExitCode() == 126) || mentionsPermission(both) {
			return out, &ToolError{Tool: t.Name, Kind: "permission", Hint: t.Grant, Output: both, Err: err}
		}
		return out, &ToolError{Tool: t.Name, Kind: "failed", Output: stderr.String(), Err: err}
	}
	if mentionsPermission(stderr.String()) || refusalNotice(out) {
		// Termux:API answers a missing Android permission with a message
		// and exit status 0.
		return out, &ToolError{Tool: t.Name, Kind: "permission", Hint: t.Grant, Output: both}
	}
	return out, nil
}

// refusalNotice reports an answer that is a permission notice and nothing
// else: Termux:API's {"error": "Please grant the following permission..."}
// (or the notice as plain text). A tool's data may say "permission denied"
// too (a received SMS's text, in termux-sms-list's or mmcli's JSON), and
// is no refusal.
func refusalNotice(out string) bool {
	out = strings.TrimSpace(out)
	if strings.HasPrefix(out, "{") {
		var notice map[string]json.RawMessage
		var msg string
		if json.Unmarshal([]byte(out), &notice) != nil || len(notice) != 1 || json.Unmarshal(notice["error"], &msg) != nil {
			return false
		}
		return mentionsPermission(msg)
	}
	return !strings.HasPrefix(out, "[") && mentionsPermission(out)
}

// capped keeps the first max bytes written to it and drops the rest; full,
// when set, is called once the limit is passed. (It has no ReadFrom, which
// io.Copy would call instead of Write.)
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
	full func()
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:room])
		if !c.over && c.full != nil {
			c.full()
		}
		c.over = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string { return c.buf.String() }

func mentionsPermission(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "permission denied") || strings.Contains(s, "grant the following permission") ||
		strings.Contains(s, "not authorized") || strings.Contains(s, "missing permission")
}
