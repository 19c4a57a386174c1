//go:build !unix

package gateway

import (
	"errors"
	"syscall"
)

// rawReads says that linkIO cannot read a socket's descriptor itself here:
// links keep the library's own (small) buffers.
const rawReads = false

func readRaw(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }

func peekRaw(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }

// setSendBufferRaw reaches no descriptor here: a link's socket under a
// wrapper keeps the buffer the kernel gives it.
func setSendBufferRaw(syscall.RawConn, int) error { return errors.ErrUnsupported }
