//go:build !unix

package main

// lockDataDir does not lock on this system: give each server on one
// machine a data dir of its own (datadir_unix.go).
func lockDataDir(string) (unlock func(), err error) { return func() {}, nil }

// lockStoreFile does not lock on this system: stop the server before a
// restore.
func lockStoreFile(string) (unlock func(), err error) { return func() {}, nil }

// holdCopy does not lock on this system, where a file open in one process
// cannot be removed by another (datadir_unix.go).
func holdCopy(string) (release func(), err error) { return func() {}, nil }

// copyHeld is false on this system: the removal of a copy a live command
// has open fails there.
func copyHeld(string) bool { return false }
