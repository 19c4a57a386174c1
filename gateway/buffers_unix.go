//go:build unix

package gateway

import (
	"os"
	"syscall"
)

// rawReads says that linkIO can read a socket's descriptor itself.
const rawReads = true

// readRaw reads the non-blocking socket fd once; syscall.EAGAIN means no
// data yet.
func readRaw(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// peekRaw reads what the non-blocking socket fd holds into p without taking
// it; syscall.EAGAIN means no data yet.
func peekRaw(fd uintptr, p []byte) (int, error) {
	for {
		n, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// setSendBufferRaw sets the socket's SO_SNDBUF, as (*net.TCPConn).SetWriteBuffer does.
func setSendBufferRaw(raw syscall.RawConn, size int) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, size)
	}); err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("setsockopt", serr)
	}
	return nil
}
