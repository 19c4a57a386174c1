package boltstore

import (
	"errors"
	"testing"
)

// A snapshot must leave its own size plus the headroom free: at the exact
// boundary it is taken, one byte less refuses it.
func TestSnapshotRoom(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{4 << 20, 2 << 30} {
		need := uint64(size) + SnapshotHeadroom(size)
		if err := checkRoom("/data", need, size); err != nil {
			t.Errorf("store of %d bytes, %d free: got %v, want room", size, need, err)
		}
		if err := checkRoom("/data", need-1, size); !errors.Is(err, ErrNoRoom) {
			t.Errorf("store of %d bytes, %d free: got %v, want ErrNoRoom", size, need-1, err)
		}
	}
	if got := SnapshotHeadroom(2 << 30); got != (2<<30)/10 {
		t.Errorf("headroom of a 2 GiB store: got %d, want a tenth", got)
	}
	// On this machine's file system the free space can be read, so a
	// store that fits is never refused for lack of an answer.
	if _, ok := freeBytes(t.TempDir()); !ok {
		t.Error("freeBytes: the free space of a temporary directory could not be read")
	}
}
