package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/simrelay/simrelay/store/boltstore"
)

// Logins sent together, from as many client addresses as the credential
// windows let through, each cost an argon2id hash and its memory: no more
// than hashesAtOnce are computed at once, the others wait their turn, and
// every one is answered.
func TestPasswordHashesAtOnceBounded(t *testing.T) {
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// Hashes long enough that the scheduler runs several at once when
	// nothing stops it.
	s, err := New(Config{PasswordTime: 1, PasswordMemory: 8 * 1024}, st, nil, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// Count the hashes under way at once. The test is not parallel, so
	// no other test's hash runs while it replaces idKey.
	var now, peak atomic.Int64
	idKey = func(pw, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return argon2.IDKey(pw, salt, time, memory, threads, keyLen)
	}
	t.Cleanup(func() { idKey = argon2.IDKey })
	tries := 4 * hashesAtOnce
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Login(context.Background(), fmt.Sprintf("u%d@example.test", i), "Wrong-Horse-9")
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != errInvalidLogin {
			t.Fatalf("a login answered %v, want the wrong password's answer", err)
		}
	}
	if peak := peak.Load(); peak > int64(hashesAtOnce) {
		t.Fatalf("%d argon2id hashes at once, want at most %d", peak, hashesAtOnce)
	}
}

// A login waiting for its turn at a hash stops waiting when its request
// ends (its client went away): no hash is computed for nobody, later
// logins do not wait behind it, and it counts as no failed login.
func TestPasswordHashWaitEndsWithItsRequest(t *testing.T) {
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := New(Config{PasswordTime: 1, PasswordMemory: 64}, st, nil, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// Every place taken, as by hashes under way.
	for range hashesAtOnce {
		hashing <- struct{}{}
	}
	freed := false
	free := func() {
		if !freed {
			freed = true
			for range hashesAtOnce {
				<-hashing
			}
		}
	}
	defer free()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Login(ctx, "gone@example.test", "Wrong-Horse-9")
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the login whose request ended answered %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		free()
		<-done
		t.Fatal("the login whose request ended still waited for a hash after 10 s")
	}
	free()
	// Its try was taken back: the address still has all its failed
	// logins of the window.
	for i := range s.LoginRate().Limit {
		if _, err := s.Login(context.Background(), "gone@example.test", "Wrong-Horse-9"); err != errInvalidLogin {
			t.Fatalf("failed login %d of the window answered %v, want the wrong password's answer", i+1, err)
		}
	}
}
