package boltstore

import (
	"errors"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/internal/boltfile"
)

// ErrBadFile is returned by Open for a data file that is not a whole bbolt
// store: truncated (a first start on a full disk, a copy cut short) or
// something else altogether. bbolt maps the file into memory and trusts its
// header, so such a file would crash the process with SIGBUS instead of an error.
var ErrBadFile = errors.New("store: the data file is damaged")

// badFileAdvice ends every ErrBadFile message: what the operator does next.
const badFileAdvice = "restore it from a backup (simrelay admin backup, GET /admin/backup) or move it away to start with an empty store"

// The header's decoding is boltfile's. boltMinPages is the fewest pages of
// a bbolt file: bbolt writes two metas, a freelist and a root leaf at init.
// A first meta page whose page size is not a power of two from 512 to
// boltMaxPageSize is taken as torn.
const (
	boltMinPages    = 4
	boltMaxPageSize = 1 << 16
)

// checkFile (and checkPages, openBolt) end an ErrBadFile message with
// advice: what to do about the file (badFileAdvice for the store's own).
//
// checkFile looks at the data file with plain reads before bbolt maps it. It
// answers empty for a zero-length file (bbolt writes a new store into it) and
// an error wrapping ErrBadFile, saying what to do, for a file bbolt cannot
// safely open. A missing file is fine: bbolt creates it.
func checkFile(path, advice string) (empty bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		// os's error names the operation and the file already.
		return false, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	size := info.Size()
	if size == 0 {
		return true, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %s; %s", ErrBadFile, path, fmt.Sprintf(format, args...), advice)
	}
	m0, err := boltfile.Read(f, 0)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return false, bad("is not a simrelay store (%d bytes, too short for a store header)", size)
		}
		return false, fmt.Errorf("store: read %s: %w", path, err)
	}
	if m0.Magic != boltfile.Magic {
		return false, bad("is not a simrelay store (no bbolt header)")
	}
	if m0.Version != boltfile.Version {
		return false, bad("has bbolt format version %d; this build reads version %d", m0.Version, boltfile.Version)
	}
	pageSize := int64(m0.PageSize)
	if !m0.SumOK || pageSize < 512 || pageSize > boltMaxPageSize || pageSize&(pageSize-1) != 0 {
		// Meta page 0 is torn; bbolt then reads page 1 at the system's page size.
		pageSize = int64(os.Getpagesize())
	}
	if need := boltMinPages * pageSize; size < need {
		return false, bad("is truncated (%d bytes, needs at least %d)", size, need)
	}
	if size%pageSize != 0 {
		return false, bad("is truncated (%d bytes, not a whole number of %d-byte pages)", size, pageSize)
	}
	m1, err := boltfile.Read(f, pageSize)
	if err != nil {
		return false, fmt.Errorf("store: read %s: %w", path, err)
	}
	if m1.Magic != boltfile.Magic || m1.Version != boltfile.Version {
		return false, bad("is damaged (its second header page is not bbolt's)")
	}
	// bbolt uses the newer of the two metas whose checksum holds (both
	// have bbolt's magic and version, checked above).
	use, ok := boltfile.Newest(m0, m1)
	if !ok {
		return false, bad("is damaged (both header pages fail their checksum)")
	}
	if need := int64(use.Pgid) * pageSize; size < need {
		return false, bad("is truncated (%d bytes, needs at least %d)", size, need)
	}
	return false, nil
}

// checkPages walks every page the store reaches, with bbolt's own
// consistency check. checkFile sees only the header and the size: a page
// overwritten in the middle of the file (a bad disk block, a backup
// corrupted in transit or edited by hand) passes it, and bbolt answers such
// a page with a panic in whichever goroutine first touches it (a request,
// the webhook pruner), taking the server down with a goroutine dump. The
// walk reads the whole file once and keeps a map entry per page: about four
// seconds per GB from the page cache and twenty from a cold disk, so it is
// not a start's work (a restart after an incident would wait minutes on a
// large store); Verify runs it on a backup before admin restore puts it in
// place, and on the store for simrelay admin check. A start runs
// checkRoots.
func checkPages(db *bolt.DB, path, advice string) error {
	var first error
	problems := 0
	// A read transaction, with no writer yet: bbolt's check is cheapest
	// there, and safe because nothing writes until Open returns.
	err := db.View(func(tx *bolt.Tx) error {
		// Check reports on the channel until its walk ends (a panic of
		// the walk included, as an error), so it is read to the end.
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
			problems++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: check %s: %w", path, err)
	}
	if first != nil {
		return fmt.Errorf("%w: %s has damaged pages (%v; %d problem(s) in all); %s", ErrBadFile, path, first, problems, advice)
	}
	return nil
}

// checkRoots reads, before anything else does, the pages every request
// stands on: the root bucket's page and each bucket's root with the first
// and last page below it. One of them overwritten (the root bucket's page
// is rewritten by almost every commit, so it is the page a torn write or a
// bad block most often hits) would panic the first goroutine that reads it;
// here it stops the start with a message naming the file. It reads a few
// pages a bucket whatever the file's size; damage deeper in the file is
// found by simrelay admin check (checkPages).
func checkRoots(db *bolt.DB, path, advice string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s has damaged pages (%v); %s", ErrBadFile, path, r, advice)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			c := b.Cursor()
			c.First()
			c.Last()
			return nil
		})
	})
}

// openBolt is bolt.Open, with a panic turned into an error: bbolt reads the
// freelist page at open and panics on one that is not a freelist.
func openBolt(path string, opt *bolt.Options, advice string) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %s has damaged pages (%v); %s", ErrBadFile, path, r, advice)
		}
	}()
	return bolt.Open(path, 0o600, opt)
}
