//go:build unix

package agent

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// killGroup starts the tool in a process group of its own and makes the
// kill on cancel reach the whole group: a script's helpers (termux-api
// under termux-sms-send) die with it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
