package stripemock

import (
	"os/exec"
	"syscall"
)

// endWithParent has the kernel kill stripe-mock when the test binary that
// started it ends however it ends: Run stops it after the tests, but a
// binary that go test kills at its -timeout, or one killed outright, never
// returns there, and its stripe-mock ran on with its ports. (The signal
// comes when the thread that started it ends; the Go runtime ends a
// thread only under a goroutine that locked it, which nothing here does.)
func endWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
