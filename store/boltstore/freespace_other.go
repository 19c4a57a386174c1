//go:build !unix

package boltstore

// freeBytes cannot tell the free space here: snapshots are not refused for it.
func freeBytes(string) (uint64, bool) { return 0, false }
