//go:build unix

package gateway

import "syscall"

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
