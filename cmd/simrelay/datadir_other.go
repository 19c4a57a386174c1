//go:build !unix

package main

// lockDataDir does not lock on this system: give each server on one
// machine a data dir of its own (datadir_unix.go).
func lockDataDir(string) (unlock func(), err error) { return func() {}, nil }

// lockStoreFile does not lock on this system: stop the server before a
// restore.
func lockStoreFile(string) (unlock func(), err error) { return func() {}, nil }
