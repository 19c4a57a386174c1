package store

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrNotFound is returned when a record does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrNoStore is returned when a read-only open finds an empty data file.
	ErrNoStore = errors.New("store: no store yet")
	// ErrLocked is returned when another process holds the store.
	ErrLocked = errors.New("store: the data file is in use by another process")
	// ErrConflict is returned when a write would break a uniqueness rule.
	ErrConflict = errors.New("store: conflict")
	// ErrBackupExternal is returned by Snapshot of a store the operator
	// backs up with the database's own tools (PostgreSQL: pg_dump).
	ErrBackupExternal = errors.New("store: this store is backed up with its database's own tools")
	// ErrLastAdmin is returned when a change would leave a company without an admin.
	ErrLastAdmin = errors.New("store: a company needs at least one admin")
)

// ErrUnavailable is returned when the store's database does not answer
// (PostgreSQL down or out of reach): nothing was done, and the same call
// may succeed later. The API answers it 503.
var ErrUnavailable = errors.New("store: the database does not answer")

// ErrDataFile is returned by the embedded store for a write while its data
// file is not the one it opened (deleted or replaced while the server ran)
// or cannot be checked: nothing was written, and nothing will be until the
// operator restores the file and restarts the server. It wraps
// ErrUnavailable, so it is answered 503 as a database out of reach is, in
// words of its own: there is no database to reach.
var ErrDataFile error = &narrower{"store: the data file cannot be written", ErrUnavailable}

// narrower is an error that is a case of a wider one (errors.Is finds both)
// but says only its own words: the embedded store has no database that
// does not answer.
type narrower struct {
	msg   string
	wider error
}

func (e *narrower) Error() string { return e.msg }
func (e *narrower) Unwrap() error { return e.wider }

// ErrDiskFull is returned when a write failed because the store's disk (or
// the user's quota, or the process's file size limit) left it no room:
// nothing was written, and the same call succeeds once there is room again.
// It wraps ErrUnavailable, so whatever retries or answers 503 for a store
// out of reach does the same for a full disk.
var ErrDiskFull = fmt.Errorf("%w: its disk is full", ErrUnavailable)

// NoSpaceErrnos are the errnos of a write that found no room: the disk
// full, the user's quota reached, the process's file size limit reached.
var NoSpaceErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG}

// NoSpace reports whether err holds one of NoSpaceErrnos: a write of a
// file that found no room, which is the server's state, never the request's
// fault (ErrDiskFull is its answer).
func NoSpace(err error) bool {
	for _, e := range NoSpaceErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ErrClosed is in the chain of the error of every method called after Close,
// reads and writes, on either backend (conformance.Closed).
var ErrClosed = errors.New("store: closed")

// ErrForeignCustomer is returned by ApplyProviderEvent when the event's
// customer is bound to another company, or the company to another customer:
// the event belongs elsewhere and changes nothing.
var ErrForeignCustomer = errors.New("store: the event's customer belongs to another company")
