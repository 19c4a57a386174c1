//go:build unix

package boltstore

import "golang.org/x/sys/unix"

// freeBytes is the space left for an unprivileged writer on dir's file
// system; ok is false when the system cannot tell.
func freeBytes(dir string) (free uint64, ok bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
