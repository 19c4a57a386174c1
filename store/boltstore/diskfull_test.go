package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// TestNoSpaceKnowsTheErrnos: a page write that failed carries its errno
// through bbolt's *os.PathError; a growth of the file that failed comes back
// as text only ("file resize error: %s"); any other failure is no lack of
// room.
func TestNoSpaceKnowsTheErrnos(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "write", Path: "/d/simrelay.db", Err: syscall.ENOSPC}, true},
		{&fs.PathError{Op: "write", Path: "/d/simrelay.db", Err: syscall.EDQUOT}, true},
		{&fs.PathError{Op: "write", Path: "/d/simrelay.db", Err: syscall.EFBIG}, true},
		{fmt.Errorf("sync: %w", &fs.PathError{Op: "fdatasync", Path: "/d/simrelay.db", Err: syscall.ENOSPC}), true},
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: "/d/simrelay.db", Err: syscall.EFBIG}), true},
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: "/d/simrelay.db", Err: syscall.ENOSPC}), true},
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: "/d/simrelay.db", Err: syscall.EIO}), false},
		{&fs.PathError{Op: "write", Path: "/d/simrelay.db", Err: syscall.EIO}, false},
		{errors.New("no space left on device"), false}, // a write function's own error, not the file's
		{os.ErrClosed, false},
		{nil, false},
	} {
		if got := noSpace(c.err); got != c.want {
			t.Errorf("noSpace(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if !errors.Is(store.ErrDiskFull, store.ErrUnavailable) {
		t.Error("ErrDiskFull does not wrap ErrUnavailable: what retries or answers 503 for a store out of reach would not for a full disk")
	}
}
