// Package stopsig names the signals at which simrelay's long-running
// commands (serve, phone, bench, the agent's run) stop in their own order.
package stopsig

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals are SIGINT, SIGTERM and SIGHUP (the hang-up of the terminal or
// ssh session the command was started from), less SIGHUP when the process
// was started with it ignored, as nohup starts it: Go would otherwise catch
// it again once it is named to signal.Notify, and a command its operator
// started to outlive the session would stop when the session closed.
func Signals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}
