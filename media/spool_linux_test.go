package media

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/simrelay/simrelay/internal/ownprocess"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// TestSpoolWithoutRoomIsTheServers lowers this process's file size limit
// under an upload, so its spool cannot be written, as on a full disk
// (EFBIG; Go ignores SIGXFSZ): the upload is store.ErrDiskFull, the 503 after
// which an agent uploads again, never the 400 of an upload that did not
// arrive whole, after which it forwards the message without the file; and
// the spool is gone.
//
// In a process of its own: the limit is the whole process's.
func TestSpoolWithoutRoomIsTheServers(t *testing.T) {
	t.Parallel()
	if !ownprocess.Run(t) {
		return
	}
	dir := t.TempDir()
	s, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: dir}, storetest.Open(t), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 4096, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	file := make([]byte, 64<<10)
	_, _, err = s.Put(context.Background(), store.Device{ID: 1, CompanyID: 1},
		Upload{Key: "wa:1/0", ContentType: "application/pdf", Length: int64(len(file)), Body: bytes.NewReader(file)})
	if rerr := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatalf("restore the file size limit: %v", rerr)
	}
	if !errors.Is(err, store.ErrDiskFull) || problem.Is(err, problem.ValidationFailed) {
		t.Fatalf("an upload whose spool found no room: %v, want store.ErrDiskFull", err)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("the spool directory after the upload: %v %v, want empty", left, err)
	}
}
