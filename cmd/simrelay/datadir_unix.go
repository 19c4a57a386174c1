//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// nodeLockName is the file in --data-dir whose lock every server holds
// while it runs (lockDataDir), whatever its store; the embedded store
// locks its own file besides.
const nodeLockName = "node.lock"

// lockDataDir takes the data dir for this server alone: what a node keeps
// for itself there (the uploads spool, which a start clears) is no other
// server's. A second server given the same dir is refused at once, as one
// on the same embedded store is. The lock goes with the process, a crash
// included; unlock releases it sooner.
func lockDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s %q: %w", both("data-dir"), dir, err)
	}
	path := filepath.Join(dir, nodeLockName)
	f, err := flockNB(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%s %q: another simrelay server uses it (%s is locked): give each server on one machine a data dir of its own", both("data-dir"), dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", both("data-dir"), dir, err)
	}
	return func() { f.Close() }, nil
}

// lockStoreFile takes the lock a server (or an admin command) holds on the
// embedded store's file while it has it open, without reading the file:
// admin restore replaces a file that may be damaged, which an open would
// refuse. errStoreInUse when another process holds it.
func lockStoreFile(path string) (unlock func(), err error) {
	f, err := flockNB(path, os.O_RDWR, 0)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: %s is locked", errStoreInUse, path)
	}
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// holdCopy locks the copy a command writes beside its destination until
// release (or the process's end, a crash included), so that another
// command's removeKilledCopies leaves it: a lock of its own descriptor, as
// the copy may be renamed into place before it is closed.
func holdCopy(path string) (release func(), err error) {
	f, err := flockNB(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// copyHeld says whether a live command holds the copy at path (holdCopy);
// one a killed command left is held by nobody.
func copyHeld(path string) bool {
	f, err := flockNB(path, os.O_RDONLY, 0)
	if err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	f.Close()
	return false
}

// flockNB opens path (os.OpenFile's flag and perm) and takes its exclusive
// lock without waiting: the lock lasts until the file is closed, or the
// process ends. A lock another holds is an error that is
// syscall.EWOULDBLOCK; any error leaves nothing open.
func flockNB(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "lock", Path: path, Err: err}
	}
	return f, nil
}
