package pacing

import (
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestTakeAllowsLimitThenRefuses(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{100, time.Minute}, clock.Now)
	for i := 1; i <= 100; i++ {
		r := w.Take("k")
		if !r.Allowed || r.Remaining != 100-i || r.Limit != 100 {
			t.Fatalf("request %d: got %+v, want allowed with Remaining %d, Limit 100", i, r, 100-i)
		}
	}
	for i := 101; i <= 103; i++ {
		r := w.Take("k")
		if r.Allowed || r.Remaining != 0 {
			t.Fatalf("request %d: got %+v, want refused with Remaining 0", i, r)
		}
		if got := r.ResetSeconds(); got != 60 {
			t.Errorf("request %d: got ResetSeconds %d, want 60", i, got)
		}
	}
}

func TestResetCountsDownAndWindowRenews(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{2, time.Minute}, clock.Now)

	if r := w.Take("k"); r.Reset != time.Minute {
		t.Fatalf("first request: got Reset %v, want 1m", r.Reset)
	}
	clock.Advance(20 * time.Second)
	w.Take("k")
	clock.Advance(500 * time.Millisecond)
	r := w.Take("k")
	if r.Allowed || r.Reset != 39500*time.Millisecond || r.ResetSeconds() != 40 {
		t.Fatalf("third request at 20.5s: got %+v (ResetSeconds %d), want refused, Reset 39.5s, 40",
			r, r.ResetSeconds())
	}

	clock.Advance(39500*time.Millisecond - time.Nanosecond)
	r = w.Take("k")
	if r.Allowed || r.Reset != time.Nanosecond || r.ResetSeconds() != 1 {
		t.Fatalf("1ns before the end: got %+v (ResetSeconds %d), want refused, Reset 1ns, 1",
			r, r.ResetSeconds())
	}

	clock.Advance(time.Nanosecond)
	r = w.Take("k")
	if !r.Allowed || r.Remaining != 1 || r.Reset != time.Minute {
		t.Fatalf("at the window's end: got %+v, want a new window: allowed, Remaining 1, Reset 1m", r)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{1, time.Minute}, clock.Now)
	if r := w.Take("a"); !r.Allowed {
		t.Fatalf("a first: got %+v, want allowed", r)
	}
	if r := w.Take("a"); r.Allowed {
		t.Fatalf("a second: got %+v, want refused", r)
	}
	if r := w.Take("b"); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("b first: got %+v, want allowed with Remaining 0", r)
	}
}

func TestWindowStartsAtFirstRequest(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{10, time.Minute}, clock.Now)

	// Not aligned to the clock: a key first seen 45 s in still gets a full
	// minute, and a key seen later gets its own.
	clock.Advance(45 * time.Second)
	if r := w.Take("a"); r.Reset != time.Minute {
		t.Fatalf("a at 45s: got Reset %v, want 1m", r.Reset)
	}
	clock.Advance(30 * time.Second)
	if r := w.Take("b"); r.Reset != time.Minute {
		t.Fatalf("b at 75s: got Reset %v, want 1m", r.Reset)
	}
	if r := w.Take("a"); r.Reset != 30*time.Second || r.Remaining != 8 {
		t.Fatalf("a at 75s: got %+v, want Reset 30s, Remaining 8", r)
	}
}

func TestResetSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reset time.Duration
		want  int
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Nanosecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{59500 * time.Millisecond, 60},
		{time.Minute, 60},
		{15 * time.Minute, 900},
	}
	for _, tt := range tests {
		if got := (Result{Reset: tt.reset}).ResetSeconds(); got != tt.want {
			t.Errorf("ResetSeconds(%v): got %d, want %d", tt.reset, got, tt.want)
		}
	}
}

func TestNearer(t *testing.T) {
	t.Parallel()
	allowed := func(rem int, reset time.Duration) Result {
		return Result{Limit: 100, Remaining: rem, Reset: reset, Allowed: true}
	}
	refused := func(reset time.Duration) Result {
		return Result{Limit: 15, Remaining: 0, Reset: reset}
	}
	tests := []struct {
		name string
		a, b Result
		want Result
	}{
		{"refused a beats allowed b", refused(time.Second), allowed(0, time.Hour), refused(time.Second)},
		{"refused b beats allowed a", allowed(0, time.Hour), refused(time.Second), refused(time.Second)},
		{"lower remaining a", allowed(3, time.Second), allowed(4, time.Hour), allowed(3, time.Second)},
		{"lower remaining b", allowed(50, time.Hour), allowed(14, time.Second), allowed(14, time.Second)},
		{"tie: longer reset a", allowed(5, time.Hour), allowed(5, time.Minute), allowed(5, time.Hour)},
		{"tie: longer reset b", allowed(5, time.Minute), allowed(5, time.Hour), allowed(5, time.Hour)},
		{"both refused: longer wait", refused(time.Minute), refused(15 * time.Minute), refused(15 * time.Minute)},
		{"full tie returns a", Result{Limit: 1, Allowed: true}, Result{Limit: 2, Allowed: true}, Result{Limit: 1, Allowed: true}},
	}
	for _, tt := range tests {
		if got := Nearer(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestTakeConcurrent(t *testing.T) {
	t.Parallel()
	const (
		limit      = 1000
		goroutines = 64
		perG       = 50 // 3200 requests per key, 3.2x the limit
	)
	keys := []string{"hot", "key:1", "key:2"}
	clock := newFakeClock()
	w := New(Rate{limit, time.Minute}, clock.Now)

	type tally struct {
		allowed   int
		remaining map[int]int // how often each Remaining was handed out when allowed
	}
	tallies := make([]map[string]*tally, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		mine := make(map[string]*tally)
		for _, k := range keys {
			mine[k] = &tally{remaining: make(map[int]int)}
		}
		tallies[g] = mine
		wg.Go(func() {
			for range perG {
				for _, k := range keys {
					r := w.Take(k)
					if r.Remaining < 0 {
						t.Errorf("key %s: got Remaining %d, want >= 0", k, r.Remaining)
					}
					if r.Allowed {
						mine[k].allowed++
						mine[k].remaining[r.Remaining]++
					}
				}
			}
		})
	}
	wg.Wait()

	for _, k := range keys {
		allowed := 0
		seen := make(map[int]int)
		for _, mine := range tallies {
			allowed += mine[k].allowed
			for rem, n := range mine[k].remaining {
				seen[rem] += n
			}
		}
		if allowed != limit {
			t.Errorf("key %s: got %d allowed, want exactly %d", k, allowed, limit)
		}
		// Each allowed request saw a distinct count: no two were handed the
		// same slot of the window.
		for rem := range limit {
			if seen[rem] != 1 {
				t.Errorf("key %s: Remaining %d handed out %d times, want 1", k, rem, seen[rem])
			}
		}
	}
}

func TestSweepDropsExpired(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{5, time.Minute}, clock.Now)
	for i := range 100 {
		w.Take("old:" + strconv.Itoa(i))
	}
	clock.Advance(30 * time.Second)
	for i := range 10 {
		w.Take("new:" + strconv.Itoa(i))
	}
	if got := w.Len(); got != 110 {
		t.Fatalf("before sweep: got Len %d, want 110", got)
	}
	w.Sweep()
	if got := w.Len(); got != 110 {
		t.Fatalf("sweep with nothing expired: got Len %d, want 110", got)
	}

	clock.Advance(30 * time.Second) // old windows end now; new ones have 30 s left
	w.Sweep()
	if got := w.Len(); got != 10 {
		t.Fatalf("after the old windows ended: got Len %d, want 10", got)
	}
	if r := w.Take("new:0"); r.Remaining != 3 {
		t.Errorf("survivor kept its count: got Remaining %d, want 3", r.Remaining)
	}

	clock.Advance(30 * time.Second)
	w.Sweep()
	if got := w.Len(); got != 0 {
		t.Fatalf("after every window ended: got Len %d, want 0", got)
	}
}

// Without any Sweep call, a stream of one-off keys must not grow the map
// without bound: Take sweeps a shard as it grows.
func TestTakeSweepsLazily(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{5, time.Second}, clock.Now)
	const rounds, perRound = 10, 20_000
	peak := 0
	for round := range rounds {
		for i := range perRound {
			w.Take(fmt.Sprintf("r%d:%d", round, i))
		}
		peak = max(peak, w.Len())
		clock.Advance(time.Second)
	}
	// Each shard holds at most its sweep threshold plus one round's share,
	// far below the 200k keys ever seen.
	if bound := numShards*minSweepLen + 2*perRound; peak > bound {
		t.Errorf("got peak Len %d after %d keys, want at most %d", peak, rounds*perRound, bound)
	}
}

func TestNewRejectsInvalidRate(t *testing.T) {
	t.Parallel()
	for _, r := range []Rate{{0, time.Minute}, {10, 0}, {10, time.Millisecond}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%v): got no panic, want one", r)
				}
			}()
			New(r, nil)
		}()
	}
}

func TestNewNilClockUsesTime(t *testing.T) {
	t.Parallel()
	w := New(Rate{1, time.Hour}, nil)
	r := w.Take("k")
	if !r.Allowed || r.Reset <= 59*time.Minute || r.Reset > time.Hour {
		t.Errorf("got %+v, want allowed with Reset close to 1h", r)
	}
}

func BenchmarkTake(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "key:" + strconv.Itoa(i)
	}
	w := New(Rate{100, time.Minute}, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			w.Take(keys[i%len(keys)])
			i += 7
		}
	})
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"not an address", "not an address"},
	} {
		if got := ClientKey(tc.in); got != tc.want {
			t.Errorf("ClientKey(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// At the cap, a new identity finds no room: its requests count in the one
// shared overflow window, which is limited like any other, while tracked
// identities keep their own windows. Once windows end, new identities get
// their own again.
func TestMaxKeysBound(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	const maxKeys = numShards * 4
	w := NewCapped(Rate{2, time.Minute}, clock.Now, maxKeys)
	for i := range 100 * maxKeys {
		w.Take(fmt.Sprintf("2001:db8::%x", i))
	}
	if n := w.Len(); n > maxKeys {
		t.Fatalf("got %d keys tracked, want at most %d", n, maxKeys)
	}
	// The flood of new identities spent the overflow window: a new one is refused.
	if r := w.Take("newcomer"); r.Allowed {
		t.Fatalf("a new identity while full: got %+v, want refused by the shared overflow window", r)
	}
	// A tracked identity is unaffected: find one that is still allowed.
	tracked := ""
	for i := range 100 * maxKeys {
		k := fmt.Sprintf("2001:db8::%x", i)
		w.shards[maphashShard(w, k)].mu.Lock()
		_, ok := w.shards[maphashShard(w, k)].m[k]
		w.shards[maphashShard(w, k)].mu.Unlock()
		if ok {
			tracked = k
			break
		}
	}
	if r := w.Take(tracked); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("a tracked identity's second request: got %+v, want allowed with 0 remaining", r)
	}
	// The windows end: new identities are tracked again.
	clock.Advance(time.Minute)
	if r := w.Take("newcomer"); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("after the windows ended: got %+v, want a fresh window of its own", r)
	}
	if n := w.Len(); n > maxKeys {
		t.Fatalf("got %d keys tracked, want at most %d", n, maxKeys)
	}
}

func maphashShard(w *Windows, key string) uint64 { return maphash.String(w.seed, key) % numShards }

// BenchmarkMemoryPerKey measures the heap one tracked identity costs: a key
// as the API makes them for an unauthenticated IPv6 client, with its window
// and its share of the map.
func BenchmarkMemoryPerKey(b *testing.B) {
	const keys = 100_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := NewCapped(Rate{100, time.Minute}, nil, keys)
		for i := range keys {
			w.Take(fmt.Sprintf("ip:2001:db8:%x:%x::/64", i>>16, i&0xffff))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "bytes/key")
		runtime.KeepAlive(w)
	}
}

func TestSpentCountsNothing(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{2, time.Minute}, clock.Now)
	for i := range 2 {
		if spent, _ := w.Spent("k"); spent {
			t.Fatalf("after %d requests: spent, want not", i)
		}
		w.Take("k")
	}
	spent, wait := w.Spent("k")
	if !spent || wait != time.Minute {
		t.Fatalf("after 2 of 2: got spent %v wait %s, want true and 1m", spent, wait)
	}
	if spent, _ := w.Spent("other"); spent {
		t.Error("an unseen key: spent, want not")
	}
	clock.Advance(time.Minute)
	if spent, _ := w.Spent("k"); spent {
		t.Error("after the window ended: spent, want not")
	}
	if r := w.Take("k"); !r.Allowed || r.Remaining != 1 {
		t.Errorf("first request of the new window: got %+v, want allowed with 1 left (Spent counted nothing)", r)
	}
}

func TestResetSecondsOfTheLongestWindow(t *testing.T) {
	cases := []struct {
		reset time.Duration
		want  int
	}{
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{math.MaxInt64, int(math.MaxInt64/time.Second) + 1},
		{math.MaxInt64 - 900*time.Millisecond, int(math.MaxInt64 / time.Second)},
	}
	for _, c := range cases {
		if got := (Result{Reset: c.reset}).ResetSeconds(); got != c.want {
			t.Errorf("Reset %d ns: got ResetSeconds %d, want %d", int64(c.reset), got, c.want)
		}
	}
	// A flag's longest window, end to end: the refusal's wait is positive.
	rate, err := ParseRate("1/2562047h47m16s")
	if err != nil {
		t.Fatal(err)
	}
	w := New(rate, nil)
	w.Take("k")
	if r := w.Take("k"); r.Allowed || r.ResetSeconds() <= 0 {
		t.Fatalf("second request in the longest window: got %+v (ResetSeconds %d), want refused with a positive wait", r, r.ResetSeconds())
	}
}

// A refund takes back one request of the open window, so that windows of
// failed tries can count each try at once and give back the ones that
// succeeded; it takes nothing back from a window that ended, nor below 0.
func TestRefund(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{2, time.Minute}, clock.Now)
	w.Take("k")
	r := w.Take("k")
	w.Refund("k", r.End)
	if r := w.Take("k"); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after 2 taken and 1 refunded: got %+v, want allowed with 0 left", r)
	}
	if r := w.Take("k"); r.Allowed {
		t.Fatalf("a third request in the window: got %+v, want refused", r)
	}
	w.Refund("unseen", r.End) // nothing to take back
	if r := w.Take("unseen"); r.Remaining != 1 {
		t.Fatalf("an unseen key's first request after a refund: got %+v, want 1 left", r)
	}
	u := w.Take("unseen")
	w.Refund("unseen", u.End)
	w.Refund("unseen", u.End)
	w.Refund("unseen", u.End)
	if r := w.Take("unseen"); r.Remaining != 1 {
		t.Fatalf("refunds beyond what was taken: got %+v, want 1 left (never below 0)", r)
	}
	clock.Advance(time.Minute)
	w.Refund("k", r.End) // its window ended: a new one starts at the next request
	if r := w.Take("k"); r.Remaining != 1 {
		t.Fatalf("first request of a new window after a late refund: got %+v, want 1 left", r)
	}
}

// A key that counted in the overflow (its shard full) is refunded there.
func TestRefundOverflow(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := NewCapped(Rate{2, time.Minute}, clock.Now, numShards)
	for i := range 100 * numShards {
		w.Take(fmt.Sprintf("k%d", i))
	}
	newcomer := ""
	for i := 0; newcomer == ""; i++ {
		k := fmt.Sprintf("new%d", i)
		s := &w.shards[maphashShard(w, k)]
		s.mu.Lock()
		if len(s.m) >= w.shardCap {
			newcomer = k
		}
		s.mu.Unlock()
	}
	r := w.Take(newcomer)
	if r.Allowed {
		t.Fatalf("the flood spent the overflow: got %+v, want refused", r)
	}
	w.Refund(newcomer, r.End)
	w.Refund(newcomer, r.End)
	if r := w.Take(newcomer); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after two refunds to the overflow: got %+v, want allowed with 0 left", r)
	}
}

// A refund that comes after its request's window ended takes nothing from
// the key's next window: the request was counted in the old one, and a
// login checked across the boundary (counted at 14:59, refunded at 15:00
// after the key's first try of the new window) gave the new window one try
// more than its limit.
func TestRefundAcrossAWindowBoundary(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	w := New(Rate{2, time.Minute}, clock.Now)
	first := w.Take("k") // window 1
	clock.Advance(time.Minute)
	w.Take("k") // window 2: 1 left
	w.Refund("k", first.End)
	if r := w.Take("k"); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("the second request of window 2: got %+v, want allowed with 0 left", r)
	}
	if r := w.Take("k"); r.Allowed {
		t.Fatalf("a third request in window 2 after a refund for window 1: got %+v, want refused", r)
	}
}
