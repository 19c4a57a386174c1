package boltstore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// A commit that finds no room on the disk (ENOSPC), over the user's quota
// (EDQUOT) or past the process's file size limit (EFBIG) is rolled back by
// bbolt: the file keeps the last commit, and nothing of the failed one is
// answered 2xx. Such a failure is turned into store.ErrDiskFull (the API's
// 503 unavailable: its client tries again, elsewhere or later), and the
// store stays "full" from the first such failure until a probe finds room
// again: Ready fails meanwhile, so a balancer stops sending here, and the
// log says it once when it starts (ERROR) and once when it ends (INFO), not
// once a request.
//
// Only a probe ends it, not any commit that succeeds: on a full disk a small
// commit still fits in the pages earlier commits freed while a batch of
// sends does not, and ending the state on the small one would flip /readyz
// and the log with every other commit. The probe writes probeBytes, more
// than the free pages of a store usually hold, so it needs room on the disk
// itself, and deletes them again at once. It runs when /readyz asks (at most
// once every probeEvery, one at a time) and after a commit that succeeds
// while full, so the state ends by itself whether or not anything polls.

// probeBytes is the probe's value: about a group commit of a hundred sends.
const probeBytes = 64 << 10

// probeEvery spaces the probes: each costs two fsyncs, and a balancer asks
// /readyz every second or so.
const probeEvery = time.Second

var keySpaceProbe = []byte("space_probe")

// space tracks whether the store's writes fail for lack of room.
type space struct {
	db  *bolt.DB
	log *slog.Logger // nil: nothing logged (an admin command's store)

	mu sync.Mutex
	// full is the failure that started the state; nil while writes fit.
	full  error
	since time.Time
	// refused counts the commits that failed for lack of room meanwhile.
	refused int
	// lastProbe is when the last probe started.
	lastProbe time.Time

	probing atomic.Bool // one probe at a time
}

// noSpace reports whether err is a write that found no room. bbolt hands a
// failed page write on as the *os.PathError it got, so errors.Is finds the
// errno; but a failed growth of the file (ftruncate, which a file size
// limit refuses) comes back formatted with %s as "file resize error: ...",
// its errno lost (bbolt v1.5.0, db.go grow), so that one is known by the
// errno's text.
func noSpace(err error) bool {
	if err == nil {
		return false
	}
	if store.NoSpace(err) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return false // another errno, kept in the chain
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "file resize error: ") && !strings.HasPrefix(msg, "file sync error: ") {
		return false
	}
	for _, e := range store.NoSpaceErrnos {
		if strings.HasSuffix(msg, e.Error()) {
			return true
		}
	}
	return false
}

// committed is given the outcome of each write transaction's commit and
// returns the error its writers get: a lack of room becomes
// store.ErrDiskFull (and starts the state), anything else is unchanged.
// full reports whether the state holds, so that the caller probes.
func (sp *space) committed(err error) (out error, full bool) {
	if !noSpace(err) {
		sp.mu.Lock()
		full = sp.full != nil
		sp.mu.Unlock()
		return err, full
	}
	out = fmt.Errorf("%w, so nothing was written: %w", store.ErrDiskFull, err)
	sp.mu.Lock()
	start := sp.full == nil
	if start {
		sp.full, sp.since, sp.refused = out, time.Now(), 0
	}
	sp.refused++
	sp.mu.Unlock()
	if start && sp.log != nil {
		sp.log.Error("the store's disk is full: writes are refused (503 unavailable) and /readyz fails until a write fits again; free space on the data directory's file system, or raise the quota or file size limit the error names (docs/operations.md)", "err", err)
	}
	return out, true
}

// ready is nil while writes fit; while the disk is full it probes (when one
// is due) and answers the state after it.
func (sp *space) ready() error {
	sp.mu.Lock()
	full := sp.full
	sp.mu.Unlock()
	if full == nil {
		return nil
	}
	sp.probe()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.full
}

// probe writes probeBytes and deletes them, if a probe is due and none
// runs; success ends the state. It takes bbolt's writer lock as any write
// does, never sp.mu while it writes.
func (sp *space) probe() {
	if !sp.probing.CompareAndSwap(false, true) {
		return
	}
	defer sp.probing.Store(false)
	sp.mu.Lock()
	due := sp.full != nil && time.Since(sp.lastProbe) >= probeEvery
	if due {
		sp.lastProbe = time.Now()
	}
	sp.mu.Unlock()
	if !due {
		return
	}
	err := sp.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySpaceProbe, make([]byte, probeBytes))
	})
	if err == nil {
		// Deleting frees the pages for the writes to come; a failure to
		// delete leaves 64 KiB that the next probe overwrites.
		err = sp.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keySpaceProbe) })
	}
	if err != nil {
		// Still full (or failing otherwise): the state stays, said once
		// already; a line a probe would be a line a second.
		return
	}
	sp.mu.Lock()
	since, refused := sp.since, sp.refused
	ended := sp.full != nil
	sp.full = nil
	sp.mu.Unlock()
	if ended && sp.log != nil {
		sp.log.Info("the store's disk has room again: writes are taken and /readyz is ready", "full_for", time.Since(since).Round(time.Second), "refused_commits", refused)
	}
}
