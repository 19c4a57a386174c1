//go:build !linux

package bench

import "os/exec"

// diesWithParent does nothing where the kernel cannot tie a child's life
// to its parent's: a bench that dies without stopping its server leaves it
// running there.
func diesWithParent(*exec.Cmd) {}
