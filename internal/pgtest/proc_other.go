//go:build unix && !linux

package pgtest

import "syscall"

// procAttr runs a child as cred (nil: as ourselves). Without a parent-death
// signal here, a server left by a killed test binary stops once the next
// run's sweep removes its directory.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
