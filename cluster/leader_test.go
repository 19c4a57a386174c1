package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/waitpar"
)

func TestMain(m *testing.M) {
	// Its tests wait (on PostgreSQL, on the bus's timeouts) far more than
	// they compute.
	waitpar.AtLeast(6)
	pgtest.Main(m)
}

// leaders records which leaders' work runs.
type leaders struct {
	mu      sync.Mutex
	running map[string]bool
	started map[string]int
}

func (r *leaders) work(name string) func(ctx context.Context) {
	return func(ctx context.Context) {
		r.mu.Lock()
		r.running[name] = true
		r.started[name]++
		r.mu.Unlock()
		<-ctx.Done()
		r.mu.Lock()
		r.running[name] = false
		r.mu.Unlock()
	}
}

// wait polls until cond holds under r's lock, for at most 10 s.
func (r *leaders) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not within 10 s: %s", what)
}

// Two nodes: one leads and the other waits; when the leader's session dies
// (its backend terminated, as when its machine goes) its work stops and
// one of the two leads again (the old leader may win the lock back on a new
// session); a clean stop hands over to the other.
func TestLeaderMovesOnDeath(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const key = 42
	r := &leaders{running: map[string]bool{}, started: map[string]int{}}
	start := func(name string) (l *Leader, stop func()) {
		l, err := NewLeader(LeaderConfig{URL: url, Key: key, Poll: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); l.Run(ctx, r.work(name)) }()
		stop = func() { cancel(); <-done }
		t.Cleanup(stop)
		return l, stop
	}
	_, stopA := start("a")
	r.wait(t, "a leads", func() bool { return r.running["a"] })
	b, stopB := start("b")
	// b tries several times while a holds the lock, and never runs: three
	// tries the database answered with the lock held (a leads throughout).
	r.wait(t, "b tried three times while a led", func() bool { return b.refused.Load() >= 3 || r.started["b"] != 0 })
	r.mu.Lock()
	if r.started["b"] != 0 {
		r.mu.Unlock()
		t.Fatal("b ran while a led")
	}
	r.mu.Unlock()

	// a's session dies: PostgreSQL releases its lock at once.
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var killed bool
	if err := admin.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = $1 AND granted`, key).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the leader's session: %v (%v)", killed, err)
	}
	// Both try for the lock again (a on a new session, b at its next poll):
	// whichever wins, the work runs again on one of them, and a's old run
	// has stopped.
	r.wait(t, "a node leads again after the leader's session died", func() bool {
		return r.started["a"]+r.started["b"] == 2 && r.running["a"] != r.running["b"]
	})

	// A clean stop lets go too: the other node takes over.
	r.mu.Lock()
	bLeads := r.running["b"]
	r.mu.Unlock()
	if bLeads {
		stopB()
		r.wait(t, "a leads after b stopped", func() bool { return r.running["a"] && !r.running["b"] })
	} else {
		stopA()
		r.wait(t, "b leads after a stopped", func() bool { return r.running["b"] && !r.running["a"] })
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := r.started["a"] + r.started["b"]; got != 3 {
		t.Fatalf("work started %v times, want three runs in all: a, a new leader after the death, the other after the stop", r.started)
	}
}
