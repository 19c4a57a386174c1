//go:build !linux

package stripemock

import "os/exec"

// endWithParent: only Linux has a signal for a child whose parent ended;
// elsewhere Run stops stripe-mock after the tests, and a test binary
// killed before that leaves it running.
func endWithParent(*exec.Cmd) {}
