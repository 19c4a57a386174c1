package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/simrelay/simrelay/internal/ownprocess"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/store"
)

// TestFullDiskFailsEveryWriterOfTheBatch lowers this process's file size
// limit under the store's data pages, so each commit fails as on a full
// disk (EFBIG; Go ignores SIGXFSZ): every writer of each group commit, and
// a write outside it, gets store.ErrDiskFull, Ready fails, the log says so
// once; with the limit lifted Ready comes back by itself (a probe), writes
// are taken, and the file holds exactly the writes that succeeded.
//
// In a process of its own: the limit is the whole process's.
func TestFullDiskFailsEveryWriterOfTheBatch(t *testing.T) {
	t.Parallel()
	if !ownprocess.Run(t) {
		return
	}
	dir := t.TempDir()
	logs := &syncbuf.Buffer{}
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	put := func(key string) error {
		return s.grouped(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put([]byte(key), bytes.Repeat([]byte("v"), 1000))
		})
	}
	if err := put("before"); err != nil {
		t.Fatal(err)
	}

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
			t.Fatalf("restore the file size limit: %v", err)
		}
	}
	// Two pages: the meta pages fit, no page of data does.
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 2 * 4096, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	defer restore()

	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range errs {
		wg.Go(func() { errs[i] = put(fmt.Sprintf("full-%03d", i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("writer %d on a full disk: %v, want store.ErrDiskFull", i, err)
		}
	}
	if _, err := s.Secret("full", 16); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("a write outside the group commit on a full disk: %v, want store.ErrDiskFull", err)
	}
	if err := s.Ready(); !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("Ready on a full disk: %v, want store.ErrDiskFull", err)
	}
	restore()
	if n := strings.Count(logs.String(), "disk is full"); n != 1 {
		t.Fatalf("the log says the disk is full %d times, want once:\n%s", n, logs)
	}

	poll.Within(t, 10*time.Second, "Ready once the disk has room", func() bool { return s.Ready() == nil })
	if err := put("after"); err != nil {
		t.Fatalf("a write once the disk has room: %v", err)
	}
	if n := strings.Count(logs.String(), "has room again"); n != 1 {
		t.Fatalf("the log says the disk has room again %d times, want once:\n%s", n, logs)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		b := tx.Bucket(bucketMeta)
		for _, k := range []string{"before", "after"} {
			if b.Get([]byte(k)) == nil {
				return fmt.Errorf("the write %q is gone", k)
			}
		}
		for i := range errs {
			if b.Get(fmt.Appendf(nil, "full-%03d", i)) != nil {
				return fmt.Errorf("the refused write full-%03d is in the store", i)
			}
		}
		if b.Get(keySpaceProbe) != nil {
			return errors.New("the probe's value stayed in the store")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
