package agent

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/simrelay/simrelay/android-protocol/client"
)

// The rows of PROTOCOL.md sections 13 and 14 not covered by
// TestBackoffFollowsTheProtocol.
func TestBackoffTable(t *testing.T) {
	t.Parallel()
	now := time.Now()
	newB := func() *backoff {
		return &backoff{base: time.Second, max: 5 * time.Minute, stable: time.Minute, probe: 15 * time.Minute}
	}
	// 4500-4999: do not reconnect until the user acts, also for a code
	// this agent does not know.
	var fatal *FatalError
	if _, err := newB().next(&closedError{code: 4599, reason: "new"}, 0, now); !errors.As(err, &fatal) {
		t.Fatalf("close 4599: got %v, want the agent stopped", err)
	}
	// 4012: back after 1 to 5 s, the count reset.
	b := newB()
	for range 5 {
		b.next(nil, 0, now)
	}
	wait, err := b.next(websocket.CloseError{Code: 4012}, 0, now)
	if err != nil || wait < time.Second || wait > 5*time.Second || b.attempt != 0 {
		t.Fatalf("4012: got %v %v attempt %d, want 1-5 s and attempt 0", wait, err, b.attempt)
	}
	// 4008 and 4029: at least 10 s.
	for _, code := range []websocket.StatusCode{4008, 4029} {
		if wait, err := newB().next(websocket.CloseError{Code: code}, 0, now); err != nil || wait < 10*time.Second {
			t.Fatalf("%d: got %v %v, want at least 10 s", code, wait, err)
		}
	}
	// 4009: at least 30 s; the third within ten minutes stops.
	b = newB()
	for i := range 3 {
		wait, err := b.next(websocket.CloseError{Code: 4009}, 0, now.Add(time.Duration(i)*time.Minute))
		if i < 2 && (err != nil || wait < 30*time.Second) {
			t.Fatalf("4009 #%d: got %v %v, want at least 30 s", i+1, wait, err)
		}
		if i == 2 && !errors.As(err, &fatal) {
			t.Fatalf("third 4009 in ten minutes: got %v, want the agent stopped", err)
		}
	}
	// 429, and a 503 without the server's error body (a proxy's):
	// Retry-After plus the jittered delay.
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		if wait, err := newB().next(&client.APIError{Status: status, RetryAfter: 7 * time.Second}, 0, now); err != nil || wait < 7*time.Second || wait > 8*time.Second {
			t.Fatalf("HTTP %d: got %v %v, want Retry-After (7 s) plus at most 1 s", status, wait, err)
		}
	}
	// 401 stops; 403 probes in 15 minutes.
	if _, err := newB().next(&client.APIError{Status: http.StatusUnauthorized}, 0, now); !errors.As(err, &fatal) {
		t.Fatalf("HTTP 401: got %v, want the agent stopped", err)
	}
	if wait, err := newB().next(&client.APIError{Status: http.StatusForbidden}, 0, now); err != nil || wait != 15*time.Minute {
		t.Fatalf("HTTP 403: got %v %v, want a probe in 15 min", wait, err)
	}
}

// The server's database out of reach (close 1013, or 503 unavailable on
// the upgrade): 1 to 15 s however many attempts came before, the count
// left as it was, Retry-After not added; so the agent is back within 15 s
// of the database's return however long it was gone. 1011 keeps the
// growing backoff.
func TestBackoffWhileTheDatabaseIsGone(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := &backoff{base: time.Second, max: 5 * time.Minute, stable: time.Minute, probe: 15 * time.Minute}
	for range 6 {
		b.next(nil, 0, now) // the network was lost a few times first
	}
	var longest time.Duration
	for i := range 200 {
		var err error = websocket.CloseError{Code: 1013, Reason: "database unavailable"}
		if i%2 == 1 {
			err = &client.APIError{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 5 * time.Second}
		}
		wait, fatal := b.next(err, 0, now)
		if fatal != nil || wait < time.Second || wait > 15*time.Second || b.attempt != 6 {
			t.Fatalf("%v, #%d: got %v %v attempt %d; want 1 to 15 s and the count left at 6", err, i+1, wait, fatal, b.attempt)
		}
		longest = max(longest, wait)
	}
	if longest < 8*time.Second {
		t.Fatalf("200 waits were all under %s: not spread over 1 to 15 s", longest)
	}
	short := &backoff{base: time.Second, max: 5 * time.Second, stable: time.Minute, probe: 15 * time.Minute}
	for range 100 {
		if wait, _ := short.next(websocket.CloseError{Code: 1013}, 0, now); wait < time.Second || wait > 5*time.Second {
			t.Fatalf("1013 with --reconnect-max 5s: waited %v, want 1 to 5 s", wait)
		}
	}
	tiny := &backoff{base: time.Second, max: 300 * time.Millisecond, stable: time.Minute, probe: 15 * time.Minute}
	for range 100 {
		if wait, _ := tiny.next(websocket.CloseError{Code: 1013}, 0, now); wait > 300*time.Millisecond {
			t.Fatalf("1013 with --reconnect-max 300ms: waited %v, want at most 300ms", wait)
		}
	}
	if b.next(websocket.CloseError{Code: 1011}, 0, now); b.attempt != 7 {
		t.Fatalf("1011: attempt %d, want 7 (the count grows)", b.attempt)
	}
}
