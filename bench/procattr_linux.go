package bench

import (
	"os/exec"
	"syscall"
)

// diesWithParent has the kernel kill the server when the bench dies
// without stopping it (killed, out of memory): a server left running
// kept its port, its phones' sockets and its temporary store.
func diesWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
