package pacing

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"
)

const (
	// numShards splits the key space so that concurrent requests of
	// different clients rarely wait on the same mutex.
	numShards = 32

	// minSweepLen is the shard size below which Take never sweeps: sweeping
	// a small map buys little memory and would cost every new key a scan.
	// 32 shards × 1024 keeps the first ~32k identities sweep-free.
	minSweepLen = 1024

	// DefaultMaxKeys bounds the identities one Windows tracks. Each costs
	// about 80 bytes of heap (BenchmarkMemoryPerKey: 76 for an IPv6 /64
	// key, amd64), so 100,000 is about 8 MB per scope: far more distinct
	// clients than one server sees within a window, and small enough that a
	// scan from a whole IPv6 range cannot take the process's memory. Beyond
	// it, new identities share one overflow window.
	DefaultMaxKeys = 100_000
)

// Result is the state of one key's window after a request was counted, in
// the terms of the RateLimit-* headers.
type Result struct {
	Limit     int
	Remaining int           // never below 0
	Reset     time.Duration // until the key's window ends
	Allowed   bool
	// End is when the window that counted the request ends, by the
	// windows' clock. It names that window (a key's next one ends later):
	// Refund takes it, to give the request back to the window that counted
	// it and to no later one.
	End time.Time
}

// ResetSeconds is Reset rounded up to whole seconds, the value of the
// RateLimit-Reset and Retry-After headers. Rounding up means a client that
// waits that long is never refused again by the same window; a positive Reset
// is at least 1 because "0" would invite an immediate retry.
func (r Result) ResetSeconds() int {
	if r.Reset <= 0 {
		return 0
	}
	// Divided first: adding a second less a nanosecond before dividing
	// overflowed for a window within a second of the longest duration.
	secs := r.Reset / time.Second
	if r.Reset%time.Second != 0 {
		secs++
	}
	return int(secs)
}

// Nearer returns whichever of a and b is nearer exhaustion, so that a request
// counted in two scopes shows the limit the client is about to hit: a refused
// result first, then the lower Remaining, then the longer Reset (the honest
// wait when both are exhausted). A full tie returns a.
func Nearer(a, b Result) Result {
	if a.Allowed != b.Allowed {
		if !a.Allowed {
			return a
		}
		return b
	}
	if a.Remaining != b.Remaining {
		if a.Remaining < b.Remaining {
			return a
		}
		return b
	}
	if b.Reset > a.Reset {
		return b
	}
	return a
}

// Windows counts requests per identity key in fixed windows, with the
// semantics of express-rate-limit's standard headers: requests 1..Limit of a
// window pass, later ones are refused, and a key's window starts at its first
// request rather than on a clock boundary.
//
// Windows is safe for concurrent use. It starts no goroutines: expired
// windows are dropped lazily as shards grow, and by Sweep, which the owner
// may call periodically to release memory sooner.
type Windows struct {
	rate Rate
	now  func() time.Time
	// epoch anchors window ends as durations since construction: 8 bytes an
	// entry instead of a time.Time, and comparisons that use the monotonic
	// clock, so wall-clock jumps do not reopen or stretch windows.
	epoch time.Time
	// seed makes shard choice unpredictable, so keys an attacker can pick
	// (identities, addresses) cannot all be steered into one shard.
	seed   maphash.Seed
	shards [numShards]shard
	// shardCap is the most keys one shard holds (maxKeys spread evenly).
	shardCap int
	// overflow is the one window that new identities share while their
	// shard is full of live windows: they are limited together, never let
	// through unlimited, and the identities already tracked are unaffected.
	omu      sync.Mutex
	overflow window // guarded by omu
}

type shard struct {
	mu sync.Mutex
	m  map[string]window // guarded by mu
	// sweepLen is the size at which the next new key triggers a sweep;
	// doubling it after each sweep keeps the cost amortised O(1) per Take.
	sweepLen int // guarded by mu
	// minEnd is at most the earliest end of the shard's windows: before
	// it, a sweep would find nothing to drop.
	minEnd time.Duration // guarded by mu
	// Keeps neighbouring shards' mutexes off one cache line.
	_ [64]byte
}

type window struct {
	end   time.Duration // since Windows.epoch
	count int           // saturates at Limit+1: more refusals change nothing
}

// New returns windows of the given rate. now is the clock; nil means
// time.Now. An invalid rate is a wiring bug (flags go through ParseRate), so
// New panics rather than limit with nonsense numbers.
//
// It tracks at most DefaultMaxKeys identities; NewCapped sets another bound.
func New(rate Rate, now func() time.Time) *Windows {
	return NewCapped(rate, now, DefaultMaxKeys)
}

// NewCapped is New tracking at most about maxKeys identities (rounded up
// to a multiple of the shard count). When a new identity's shard is full
// and holds no expired window to drop, its requests count in one overflow
// window shared by every such identity, with the same limit.
func NewCapped(rate Rate, now func() time.Time, maxKeys int) *Windows {
	if err := rate.Validate(); err != nil {
		panic(fmt.Sprintf("pacing.New: %v", err))
	}
	if maxKeys < 1 {
		panic(fmt.Sprintf("pacing.NewCapped: maxKeys %d: want at least 1", maxKeys))
	}
	if now == nil {
		now = time.Now
	}
	w := &Windows{rate: rate, now: now, epoch: now(), seed: maphash.MakeSeed(), shardCap: (maxKeys + numShards - 1) / numShards}
	for i := range w.shards {
		w.shards[i].m = make(map[string]window)
		w.shards[i].sweepLen = minSweepLen
		w.shards[i].minEnd = math.MaxInt64
	}
	return w
}

// Rate is the rate the windows were built with.
func (w *Windows) Rate() Rate { return w.rate }

// Take counts one request for key and reports whether it is allowed.
// Refused requests count too, which keeps Remaining at 0 until the window
// ends instead of letting a hammering client through.
func (w *Windows) Take(key string) Result {
	// The clock is read before locking because it is injected and may be
	// slow; a goroutine that read it a moment before another can then land
	// in a window that began "after" it, which only clamps Reset below.
	now := w.since()
	limit, length := w.rate.Limit, w.rate.Window

	s := &w.shards[maphash.String(w.seed, key)%numShards]
	s.mu.Lock()
	e, ok := s.m[key]
	if !ok {
		// A full shard is swept only when one of its windows has ended, so a
		// flood of new identities does not pay a scan each.
		full := len(s.m) >= w.shardCap
		if !full && len(s.m) >= s.sweepLen || full && now >= s.minEnd {
			s.sweep(now)
		}
		if len(s.m) >= w.shardCap {
			s.mu.Unlock()
			return w.takeOverflow(now)
		}
	}
	if !ok || now >= e.end {
		e = window{end: addSat(now, length)}
		s.minEnd = min(s.minEnd, e.end)
	}
	if e.count <= limit {
		e.count++
	}
	s.m[key] = e
	s.mu.Unlock()

	reset := min(e.end-now, length)
	return Result{
		Limit:     limit,
		Remaining: max(limit-e.count, 0),
		Reset:     reset,
		Allowed:   e.count <= limit,
		End:       w.epoch.Add(e.end),
	}
}

// Spent reports, without counting a request, whether key's window has no
// request left, and how long until it ends. A credential check asks it
// before it checks, so that once a client address has spent its tries even
// a right credential is refused: otherwise the answer would still tell a
// guess right from wrong. A key in the shared overflow is judged by it.
func (w *Windows) Spent(key string) (bool, time.Duration) {
	now := w.since()
	s := &w.shards[maphash.String(w.seed, key)%numShards]
	s.mu.Lock()
	e, ok := s.m[key]
	full := len(s.m) >= w.shardCap
	s.mu.Unlock()
	if !ok {
		if !full {
			return false, 0
		}
		w.omu.Lock()
		e = w.overflow
		w.omu.Unlock()
	}
	if now >= e.end || e.count < w.rate.Limit {
		return false, 0
	}
	return true, e.end - now
}

// Refund takes back one request of key that Take counted, for a request
// that proved not to be what the windows count: a login whose password was
// right, in windows of failed logins, which counts each try before the
// password is checked so that tries sent at once cannot all pass before the
// first is counted. end is the End of Take's Result: the request is taken
// back from the window that counted it while that window is still open, and
// from no other. A window that has ended since is left alone (a new one
// starts at the next request anyway), and so is the key's next window,
// which never counted the request: a refund that arrived after the
// boundary gave it one request more than its limit. A key with no window
// of its own counted in the overflow if its shard is full, and is taken
// back from it on the same terms.
func (w *Windows) Refund(key string, end time.Time) {
	now := w.since()
	at := end.Sub(w.epoch)
	s := &w.shards[maphash.String(w.seed, key)%numShards]
	s.mu.Lock()
	e, ok := s.m[key]
	if ok {
		if e.end == at && now < e.end && e.count > 0 {
			e.count--
			s.m[key] = e
		}
		s.mu.Unlock()
		return
	}
	full := len(s.m) >= w.shardCap
	s.mu.Unlock()
	if !full {
		return
	}
	w.omu.Lock()
	if w.overflow.end == at && now < w.overflow.end && w.overflow.count > 0 {
		w.overflow.count--
	}
	w.omu.Unlock()
}

// takeOverflow counts a request of an identity that found no room.
func (w *Windows) takeOverflow(now time.Duration) Result {
	limit, length := w.rate.Limit, w.rate.Window
	w.omu.Lock()
	e := w.overflow
	if now >= e.end {
		e = window{end: addSat(now, length)}
	}
	if e.count <= limit {
		e.count++
	}
	w.overflow = e
	w.omu.Unlock()
	return Result{Limit: limit, Remaining: max(limit-e.count, 0), Reset: min(e.end-now, length), Allowed: e.count <= limit, End: w.epoch.Add(e.end)}
}

// Sweep drops every expired window. Take sweeps a shard only when it grows,
// so an owner that wants memory back after a burst of one-off clients calls
// Sweep on a ticker.
func (w *Windows) Sweep() {
	now := w.since()
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		s.sweep(now)
		s.mu.Unlock()
	}
}

// Len is the number of keys held, expired ones not yet swept included; it is
// meant for metrics and tests.
func (w *Windows) Len() int {
	n := 0
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (w *Windows) since() time.Duration { return w.now().Sub(w.epoch) }

// sweep must be called with s.mu held.
func (s *shard) sweep(now time.Duration) {
	before := len(s.m)
	s.minEnd = math.MaxInt64
	for k, e := range s.m {
		if now >= e.end {
			delete(s.m, k)
		} else {
			s.minEnd = min(s.minEnd, e.end)
		}
	}
	// Go maps never shrink their buckets, so after a burst (say, a scan from
	// many addresses) the survivors move to a fresh map and the old one is
	// collected; copying only when most keys went keeps this amortised.
	if n := len(s.m); n < before/2 {
		fresh := make(map[string]window, n)
		for k, e := range s.m {
			fresh[k] = e
		}
		s.m = fresh
	}
	s.sweepLen = max(minSweepLen, 2*len(s.m))
}

// addSat adds without overflowing, so an enormous window ends "never" instead
// of in the past.
func addSat(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
