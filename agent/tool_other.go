//go:build !unix

package agent

import "os/exec"

// killGroup leaves the default: the tool alone is killed on cancel (the
// agent's transports run on Unix: Linux, Android, macOS).
func killGroup(*exec.Cmd) {}
