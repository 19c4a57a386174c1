//go:build !linux

package postgres

import "syscall"

// setUserTimeout does nothing: TCP_USER_TIMEOUT is Linux's; elsewhere the
// keepalive alone notices a silent peer.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
