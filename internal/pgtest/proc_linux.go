package pgtest

import "syscall"

// procAttr runs a child as cred (nil: as ourselves) and has it sent SIGQUIT,
// PostgreSQL's immediate shutdown, when the test binary dies without
// stopping it.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
}
